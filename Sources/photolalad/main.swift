// The single executable: dispatches on the program name (photolalad or photolalactl).
import CLI

await Entry.main()
