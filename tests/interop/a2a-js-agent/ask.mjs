// The official JavaScript SDK's client (@a2a-js/sdk 1.3.0) asks an A2A agent one thing and prints what came back as
// one JSON line: node ask.mjs URL TOKEN TEXT [TIMEOUT_MS]. anima's interoperability test points it at a persona.
import { randomUUID } from 'node:crypto';
import { Role } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const [url, token, text, timeoutMs] = process.argv.slice(2);
const textOf = (parts) => (parts ?? []).filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('\n');
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory()],
}));
const options = { serviceParameters: token ? { Authorization: `Bearer ${token}` } : {},
                  signal: AbortSignal.timeout(Number(timeoutMs || 120000)) };
try {
  const client = await factory.createFromUrl(url);
  const result = await client.sendMessage({
    tenant: '', metadata: {}, configuration: undefined,
    message: { messageId: randomUUID(), role: Role.ROLE_USER, taskId: '', contextId: '', extensions: [],
               metadata: { from: 'juniper' }, referenceTaskIds: [],
               parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }] },
  }, options);
  const task = result?.payload?.$case === 'task' ? result.payload.value : ('status' in (result ?? {}) ? result : undefined);
  if (task) {
    console.log(JSON.stringify({ kind: 'task', id: task.id, state: task.status?.state, status: textOf(task.status?.message?.parts),
                                 artifacts: (task.artifacts ?? []).map((a) => textOf(a.parts)) }));
  } else {
    const message = result?.payload?.value ?? result;
    console.log(JSON.stringify({ kind: 'message', text: textOf(message?.parts) }));
  }
} catch (error) {
  console.log(JSON.stringify({ kind: 'error', error: String(error?.message ?? error) }));
  process.exit(1);
}
