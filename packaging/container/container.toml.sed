# Turns the shipped /etc/photolala/photolalad.toml into the container image's default,
# written to /config/photolalad.toml on the first start (scripts/build-image).
1,9c\
# /config/photolalad.toml — configuration of photolalad in its container.\
#\
# Written on the first start: it backs up /photos, the folder (or folders below it) you\
# mount read-only, and keeps its state in /state. Edit it on the NAS, then restart the\
# container (or: docker kill -s HUP photolalad, which reloads it). Check it with\
#     docker exec photolalad photolalad --check-config\
#\
# Durations: seconds or "90s", "15m", "6h".  Sizes: bytes or "16MiB", "1GiB".\
# Rates: "off" or a size per second such as "10MiB/s".  Unknown keys are errors.\
# See photolalad.toml(5).
s|^#device_name = "nas"|# In a container the hostname is the container's: name this NAS here.\n#device_name = "nas"|
s|^# The daemon's user (photolala) must be able to read them: see photolalad(8).|# Mounted read-only at /photos (several folders: mount them below /photos).\n# The container's user (PUID, PGID) must be able to read them.|
s|^folders = \[\]|folders = ["/photos"]|
s|^#state_dir = "/var/lib/photolala"|state_dir = "/state"|
s|^# Members of this group may read the status with photolalactl.|# Members of this group (PGID in the container) may read the status with photolalactl.|
