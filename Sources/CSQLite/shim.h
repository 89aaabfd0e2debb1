// CSQLite: the system SQLite 3 (pkg-config sqlite3, Debian libsqlite3-dev) seen from Swift.
// Decide's durable storage (Sources/Decide/Storage*.swift) is its only user.
#ifndef DECIDE_CSQLITE_SHIM_H
#define DECIDE_CSQLITE_SHIM_H

#include <sqlite3.h>

#endif
