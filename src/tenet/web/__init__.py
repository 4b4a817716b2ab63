"""Server-rendered public pages (the invitation link today; guest check-in and QR display to come)."""
