// Mnemograph UI: the only script. Typed confirmations keep their button disabled until the text matches
// (the server checks again: this is a convenience, not a defence).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    const want = form.dataset.confirm;
    const input = form.querySelector("input[name=confirm]");
    const button = form.querySelector("button[type=submit]");
    if (!input || !button) continue;
    const sync = () => { button.disabled = input.value.trim() !== want; };
    input.addEventListener("input", sync);
    sync();
  }
  const token = document.getElementById("new-token");
  if (token) { token.focus(); token.select(); }
});
