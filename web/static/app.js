// anima's only script: keep the conversation scrolled to the newest message, draw the Inner life charts (uPlot),
// keep one card per tick on Thoughts, push-to-talk on Talk (MediaRecorder → POST /api/talk/voice), Enter to send.
// Everything else is htmx.
document.addEventListener("htmx:afterSwap", (event) => {
  const box = document.getElementById("conversation");
  if (box && box.contains(event.detail.target) || event.detail.target === box) box.scrollTop = box.scrollHeight;
});
document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("conversation");
  if (box) box.scrollTop = box.scrollHeight;
});

// Inner life: draw the uPlot charts whose data the server embedded (<script type="application/json">).
const CHART_COLOURS = ["#1e88e5", "#e53935", "#43a047", "#fb8c00"];
const ONE_POINT_WINDOW_S = 1800;  // a single point in time: half an hour either side
const MIN_TIME_PAD_S = 60;

// One axis's range from its values, padded: `share` of the span on each side (at least `minPad`); a single value (or
// a flat line) gets a window around it — `window` on each side, or, without one, 10% of its size (1 around zero).
function paddedRange(values, share, window, minPad) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) {
    if (typeof v === "number" && isFinite(v)) { if (v < lo) lo = v; if (v > hi) hi = v; }
  }
  if (lo === Infinity) return [0, 1];
  if (hi === lo) {
    const pad = window != null ? window : (lo === 0 ? 1 : Math.abs(lo) * 0.1);
    return [lo - pad, hi + pad];
  }
  const pad = Math.max((hi - lo) * share, minPad || 0);
  return [lo - pad, hi + pad];
}

// The chart's domain: x (seconds since the epoch) and y (every series' values) from the data, with padding.
function chartDomain(xs, columns) {
  return { x: paddedRange(xs, 0.03, ONE_POINT_WINDOW_S, MIN_TIME_PAD_S), y: paddedRange(columns.flat(), 0.08, null, 0) };
}

function drawCharts() {
  if (typeof uPlot === "undefined") return;
  document.querySelectorAll("[data-chart]:not([data-drawn])").forEach((box) => {
    box.dataset.drawn = "1";
    const chart = JSON.parse(document.getElementById(box.dataset.chart).textContent);
    if (!chart.x.length) return;
    const columns = chart.series.map((s) => s.values);
    const domain = chartDomain(chart.x, columns);
    const series = chart.series.map((s, i) => ({
      label: s.label, stroke: CHART_COLOURS[i % CHART_COLOURS.length], spanGaps: true,
      width: s.points_only ? 0 : 1.5, points: { show: s.points_only || chart.x.length < 40, size: s.points_only ? 8 : 4 },
    }));
    // once drawn, what was drawn (for the browser tests and anyone inspecting): the scales' range, the axes' labels
    const drawn = (u) => {
      box.dataset.domain = JSON.stringify({ x: [u.scales.x.min, u.scales.x.max], y: [u.scales.y.min, u.scales.y.max] });
      box.dataset.xLabels = JSON.stringify((u.axes[0]._values || []).map(String));
      box.dataset.yLabels = JSON.stringify((u.axes[1]._values || []).map(String));
    };
    new uPlot({ width: Math.max(280, box.clientWidth || 600), height: 220, series: [{}, ...series],
                scales: { x: { time: true, range: () => domain.x }, y: { range: () => domain.y } },
                axes: [{}, { label: chart.y_label }], hooks: { draw: [drawn] } }, [chart.x, ...columns], box);
  });
}
document.addEventListener("DOMContentLoaded", drawCharts);
document.addEventListener("htmx:afterSwap", drawCharts);

// Thoughts: a tick shown while it ran is replaced by its closed card when that arrives live (the newer one, on top).
document.addEventListener("htmx:sseMessage", () => {
  const seen = new Set();
  document.querySelectorAll("#ticks article.tick").forEach((card) => {
    if (seen.has(card.id)) card.remove(); else seen.add(card.id);
  });
});

// An error shows in #flash (htmx-config in base.html) until the human's next change succeeds.
document.addEventListener("htmx:afterRequest", (event) => {
  const flash = document.getElementById("flash");
  if (flash && event.detail.successful && event.detail.requestConfig && event.detail.requestConfig.verb !== "get") {
    flash.replaceChildren();
  }
});

// Talk: push-to-talk. Hold the button (mouse, touch or Space/Enter) to record with MediaRecorder; letting go posts
// the recording to /api/talk/voice, which transcribes it offline and answers the note, shown like a written one.
function pushToTalk() {
  const button = document.getElementById("push-to-talk");
  if (!button || button.dataset.ready) return;
  button.dataset.ready = "1";
  const status = document.getElementById("voice-status");
  const say = (text) => { if (status) status.textContent = text; };
  // the page's language: the template puts each line, translated, on the button (data-msg-*; %(name)s filled here)
  const msg = (key, values = {}) => (button.dataset[key] || key).replace(/%\((\w+)\)s/g, (_, name) => values[name] ?? "");
  if (!navigator.mediaDevices || typeof MediaRecorder === "undefined") {
    button.disabled = true; say(msg("msgUnsupported")); return;
  }
  let recorder = null, chunks = [], stream = null, held = false;
  const start = async () => {
    held = true;
    if (recorder) return;
    try { stream = await navigator.mediaDevices.getUserMedia({ audio: true }); }
    catch (error) { say(msg("msgNoMicrophone", { error: error.message })); return; }
    chunks = [];
    recorder = new MediaRecorder(stream);
    recorder.ondataavailable = (event) => { if (event.data.size) chunks.push(event.data); };
    recorder.onstop = () => send(new Blob(chunks, { type: recorder.mimeType || "audio/webm" }));
    recorder.start(250);
    button.setAttribute("aria-pressed", "true"); say(msg("msgListening"));
    if (!held) stop();  // let go while the microphone was opening
  };
  const stop = () => {
    held = false;
    if (!recorder || recorder.state === "inactive") return;
    recorder.stop(); stream.getTracks().forEach((track) => track.stop());
    button.setAttribute("aria-pressed", "false"); say(msg("msgTranscribing"));
  };
  const send = async (blob) => {
    recorder = null;
    const headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
    headers["Content-Type"] = blob.type.split(";")[0] || "audio/webm";
    const response = await fetch(button.dataset.voiceUrl, { method: "POST", headers, body: blob });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) { say(answer.error || msg("msgNotTaken", { status: response.status })); return; }
    const bubble = document.createElement("article");
    bubble.className = "bubble human spoken";
    bubble.id = `note-${answer.note.id}`; bubble.dataset.note = answer.note.id;
    const header = document.createElement("header"), small = document.createElement("small");
    const text = document.createElement("p");
    small.textContent = msg("msgJustNow"); header.append(small);
    text.textContent = answer.transcript; bubble.append(header, text);
    const box = document.getElementById("conversation");
    box.append(bubble); box.scrollTop = box.scrollHeight;
    say(msg("msgHeard", { language: answer.language, seconds: answer.seconds.toFixed(1) }));
  };
  button.addEventListener("pointerdown", (event) => { event.preventDefault(); start(); });
  ["pointerup", "pointerleave"].forEach((name) => button.addEventListener(name, stop));
  const isPress = (event) => event.key === " " || event.key === "Enter";
  button.addEventListener("keydown", (event) => {
    if (isPress(event) && !event.repeat) { event.preventDefault(); start(); }
  });
  button.addEventListener("keyup", (event) => { if (isPress(event)) stop(); });
}
document.addEventListener("DOMContentLoaded", pushToTalk);

// Talk: Enter sends the message, Shift+Enter starts a new line (not while an input method composes a word).
document.addEventListener("keydown", (event) => {
  const box = event.target;
  if (!(box instanceof HTMLTextAreaElement) || box.id !== "message-text") return;
  if (event.key !== "Enter" || event.shiftKey || event.isComposing || event.keyCode === 229) return;
  event.preventDefault();
  if (box.value.trim()) box.form.requestSubmit();
});

// Talk: a turn the page already shows (the note just sent, answered by the POST) is not appended again by the
// live stream, which sends every new turn of the open thread.
document.addEventListener("htmx:sseBeforeMessage", (event) => {
  const found = /id="note-(\d+)"/.exec(event.detail.data || "");
  if (found && document.getElementById(`note-${found[1]}`)) event.preventDefault();
});
