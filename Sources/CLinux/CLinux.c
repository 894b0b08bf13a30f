// Intentionally empty: the functions are static inline in CLinux.h.
