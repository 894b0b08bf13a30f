/// PhotolalaCore: Sendable value types shared by every module: the status snapshot, settings and their units. No I/O beyond time formatting.
