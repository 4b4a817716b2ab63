// Starts Swagger UI on /docs. A file, not an inline script, so the page's CSP can stay script-src 'self'.
// Loaded with `defer` after swagger-ui-bundle.js: the bundle has run and the page is parsed.
"use strict";

(() => {
  const bundle = window.SwaggerUIBundle;
  window.ui = bundle({
    url: document.getElementById("swagger-ui").dataset.openapiUrl,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    presets: [bundle.presets.apis, bundle.SwaggerUIStandalonePreset],
  });
})();
