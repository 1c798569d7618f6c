/* io/mapguard.h - a file mapped for reading that is truncated while in use
 * must not kill the process. Reading a page of a file mapping that lies past
 * the file's new end raises SIGBUS, whose default action ends the process
 * with nothing logged; the weights of a model are used straight from such a
 * mapping.
 *
 * Mappings registered here are guarded by a SIGBUS handler (installed on the
 * first registration, for the whole process): a fault inside one replaces
 * the rest of that mapping, from the faulting page on, with zero pages
 * (mmap MAP_FIXED over it), marks the mapping faulted and returns, so the
 * faulting read goes on and reads zeros. Whoever computed from the mapping
 * must then discard the result: io_mapguard_faulted says which mapping
 * faulted, io_mapguard_faults whether any did (one atomic load, cheap enough
 * to ask around every forward pass). A fault outside every registered
 * mapping goes to the handler that was there before (by default: the
 * process ends, as without this module).
 *
 * Limits: this protects against truncation (the only change of a file that
 * faults a mapping); bytes rewritten in place within the file's size are
 * read as they now are, undetected until io_mapguard_changed sees the size,
 * mtime or inode differ. Calling mmap from a signal handler is outside
 * POSIX's async-signal-safe list; on Linux it is one system call and takes
 * no lock. The handler scans a fixed table of IO_MAPGUARD_MAX mappings;
 * past that, registration fails and the mapping is unguarded (as before).
 *
 * Threads: every function may be called from any thread. */
#ifndef COLIBRI_IO_MAPGUARD_H
#define COLIBRI_IO_MAPGUARD_H

#include <stddef.h>
#include <stdint.h>

#define IO_MAPGUARD_MAX 1024

/* Guards [addr, addr + n), the mapping of the file at path (whose size,
 * mtime and inode now are remembered for io_mapguard_changed). 0, or -1
 * when the table is full or the handler cannot be installed. */
int  io_mapguard_add(const void *addr, size_t n, const char *path);
/* Stops guarding the mapping at addr (before it is unmapped). */
void io_mapguard_remove(const void *addr);
/* Faults caught so far, in all mappings. */
uint64_t io_mapguard_faults(void);
/* 1 when a read of the mapping at addr faulted (its rest reads zeros now). */
int  io_mapguard_faulted(const void *addr);
/* 1 when the file at path is no longer what was mapped: its size or mtime
 * changed with the same inode (rewritten or truncated in place), and
 * msg[0..cap) says how; 0 when unchanged, or when another file replaced it
 * by rename (the mapping still holds the old one's data, whole). */
int  io_mapguard_changed(const void *addr, char *msg, size_t cap);

#endif
