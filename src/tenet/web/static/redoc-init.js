// Starts ReDoc on /redoc. A file, not an inline script, so the page's CSP can stay script-src 'self'.
// ReDoc writes its styles into <style> elements; it gives them the nonce the page's CSP allows.
"use strict";

(() => {
  const root = document.getElementById("redoc");
  window.Redoc.init(root.dataset.specUrl, { nonce: root.dataset.styleNonce }, root);
})();
