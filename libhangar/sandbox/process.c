/* being written */
#include "sandbox.h"
