"""The reservation desk (issue 19): the pages agents work their hotels' queues in, under `/console/desk`, on the
consoles' web layer (tenet.web.console: sessions, CSRF, languages, errors in words). Pages call the queries and
services the API routes call, with the caller's visible-hotel rule inside each statement: another hotel's order is
the same 404 as a missing one, also by editing a URL."""

from __future__ import annotations

from tenet.reservations.pages import cards, execution, history, hotels, orders, queue
from tenet.web import console

console.register_templates("tenet.reservations.pages")

ROUTERS = (hotels.router, queue.router, orders.router, history.router, cards.router, execution.router)
