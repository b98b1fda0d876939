// anima's only script: keep the conversation scrolled to the newest message. Everything else is htmx.
document.addEventListener("htmx:afterSwap", (event) => {
  const box = document.getElementById("conversation");
  if (box && box.contains(event.detail.target) || event.detail.target === box) box.scrollTop = box.scrollHeight;
});
document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("conversation");
  if (box) box.scrollTop = box.scrollHeight;
});
