// CDecideHints is header-only (include/CDecideHints.h); SwiftPM needs one source file per C target.
#include "CDecideHints.h"
