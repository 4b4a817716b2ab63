"""Routes of meeting attendance (filled slice by slice)."""

ROUTERS = ()
OPENAPI_TAGS = ()
