"""Where responses live: the append-only event logs and their records (memory, SQLite, Redis), leases, the
split of foreground and background responses, and conversation records. Below everything but telemetry/."""
