"""Jobs of meeting attendance."""

import procrastinate

blueprint = procrastinate.Blueprint()
