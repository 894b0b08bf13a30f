#include <inotifytools/inotifytools.h>
#include <inotifytools/inotify.h>
