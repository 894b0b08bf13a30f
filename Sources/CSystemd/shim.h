#include <systemd/sd-daemon.h>
#include <sys/prctl.h>

// Process hardening that goes with running as a system service: no core dump may hold
// a token. (prctl is variadic, which Swift cannot call directly.)
static inline int photolala_disable_core_dumps(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}
