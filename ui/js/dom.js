// Small DOM helpers shared by the dashboard's panels.

export const $ = (id) => document.getElementById(id);

// Writes only what changed: each write is style work and a repaint for WebKit.
export function setText(el, text, value) {
  if (el.textContent !== text) el.textContent = text;
  if (value !== undefined && el.dataset.value !== String(value)) el.dataset.value = String(value);
}
