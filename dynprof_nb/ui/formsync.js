// Sends the panel's typed text with a press of Apply, ahead of the click itself.
//
// ipywidgets sends a model's state one message at a time: while the kernel has not answered
// the last one, later keystrokes wait in a buffer, but a button's click goes at once. Typed
// fast while the kernel was busy, "12x5" reached the kernel after the click that should have
// applied it, and Apply saw "1". This listener runs in the capture phase, before the button's
// own handler, and sends what every text field shows; the kernel copies it into the fields
// before it handles the click, since one kernel connection keeps its messages in order.
function fieldKey(box) {
  for (const name of box.classList) {
    if (name.startsWith("dynprof-field-")) return name.slice("dynprof-field-".length);
  }
  return null;
}

function render({ model, el }) {
  el.style.display = "none";
  const onClick = (event) => {
    const panel = el.closest(".dynprof-panel");
    const apply = event.target instanceof Element ? event.target.closest(".dynprof-apply") : null;
    if (!panel || !apply || !panel.contains(apply)) return;
    const values = {};
    for (const box of panel.querySelectorAll('[class*="dynprof-field-"]')) {
      const key = fieldKey(box);
      const input = box.querySelector('input[type="text"]');
      if (key && input) values[key] = input.value;
    }
    model.send({ values });
  };
  document.addEventListener("click", onClick, true);
  return () => document.removeEventListener("click", onClick, true);
}

export default { render };
