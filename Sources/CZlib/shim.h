#include <zlib.h>

// zlib's init functions are macros (they pass the library version and the stream's
// size); Swift sees only functions.
static inline int czlib_inflate_init(z_stream *stream) { return inflateInit(stream); }
