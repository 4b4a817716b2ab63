"""Meeting attendance (spec 001, issue 10): meetings, series, templates, QR check-in, reports, audit, pages."""
