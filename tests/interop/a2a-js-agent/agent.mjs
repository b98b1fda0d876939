// An A2A agent that is not anima's code: the official JavaScript SDK (@a2a-js/sdk 1.3.0, A2A 1.0) serving JSON-RPC
// with express. anima's interoperability test (tests/integration/test_a2a_interop_js.py) runs it on loopback:
//   node agent.mjs PORT NAME TOKEN
// It answers every message "<NAME> heard: <text>" as a completed task, and takes a call only with
// `Authorization: Bearer TOKEN` (the credential it issued to the persona). One JSON line per message it took goes to
// stdout, so the test sees what arrived.
import { randomUUID } from 'node:crypto';
import express from 'express';
import { AgentCard, Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

const [port, name, token] = process.argv.slice(2);
if (!port || !name || !token) {
  console.error('usage: node agent.mjs PORT NAME TOKEN');
  process.exit(2);
}
const base = `http://127.0.0.1:${port}`;

const textPart = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const textOf = (message) => message.parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('\n');

const card = {
  name,
  description: `${name}, an A2A agent on the JavaScript SDK`,
  supportedInterfaces: [{ url: `${base}/a2a`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
  provider: undefined,
  version: '1.0.0',
  capabilities: { streaming: false, pushNotifications: false, extensions: [] },
  securitySchemes: { bearer: { scheme: { $case: 'httpAuthSecurityScheme', value: { description: '', scheme: 'bearer', bearerFormat: '' } } } },
  securityRequirements: [{ schemes: { bearer: { list: [] } } }],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [{ id: 'echo', name: 'echo', description: 'says what it heard', tags: ['echo'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  signatures: [],
};

class HeardExecutor {
  cancelTask = async () => {};

  async execute(context, bus) {
    const text = textOf(context.userMessage);
    console.log(JSON.stringify({ event: 'message', text, metadata: context.userMessage.metadata ?? {} }));
    const reply = { role: Role.ROLE_AGENT, messageId: randomUUID(), parts: [textPart(`${name} heard: ${text}`)],
                    taskId: context.taskId, contextId: context.contextId, extensions: [], metadata: {}, referenceTaskIds: [] };
    bus.publish(AgentEvent.task({ id: context.taskId, contextId: context.contextId,
                                  status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: new Date().toISOString(), message: undefined },
                                  artifacts: [], history: [context.userMessage], metadata: {} }));
    bus.publish(AgentEvent.artifactUpdate({ taskId: context.taskId, contextId: context.contextId, append: false, lastChunk: true, metadata: undefined,
                                            artifact: { artifactId: randomUUID(), name: 'reply', description: '', parts: reply.parts, metadata: undefined, extensions: [] } }));
    bus.publish(AgentEvent.statusUpdate({ taskId: context.taskId, contextId: context.contextId, metadata: undefined,
                                          status: { state: TaskState.TASK_STATE_COMPLETED, timestamp: new Date().toISOString(), message: reply } }));
  }
}

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new HeardExecutor());
const app = express();
// the handler writes the card object as it is: the SDK's own codec gives it its wire form (A2A JSON)
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: async () => AgentCard.toJSON(card) }));
app.use('/a2a', (req, res, next) => {
  if (req.headers.authorization !== `Bearer ${token}`) {
    console.log(JSON.stringify({ event: 'refused', authorization: req.headers.authorization ? 'wrong' : 'none' }));
    res.status(401).set('WWW-Authenticate', 'Bearer').json({ error: 'a credential I issued, please' });
    return;
  }
  next();
});
app.use('/a2a', jsonRpcHandler({ requestHandler: handler, userBuilder: async () => ({ isAuthenticated: true, userName: 'caller' }) }));
app.listen(Number(port), '127.0.0.1', () => console.log(JSON.stringify({ event: 'listening', url: base })));
