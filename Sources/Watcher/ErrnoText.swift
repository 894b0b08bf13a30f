#if canImport(Glibc)
import Glibc
#endif

/// The system's sentence for an errno, for log lines and scan problems.
func errnoText(_ err: Int32) -> String {
    String(cString: strerror(err))
}
