/// Watcher: Finds photos: inotify watches, the settle/roll-up aggregator, and the directory scanner.

