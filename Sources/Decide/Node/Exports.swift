// Users of Decide see the core value types (StateKey, Version, Entry, Delta) without a second import.
@_exported import DecideCore
