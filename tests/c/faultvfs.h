/*
** faultvfs.h: a shim over the default VFS for the model, fault and skew
** tests (header-only; each program includes it once).
**
**   fvfs_register(p, zName)   register p (a FaultVfs the caller owns) as VFS
**                             zName over the default VFS, not as default
**
** Each FaultVfs has its own clock and its own fault plan:
**
**   clockMs        0: the real clock; else the Unix ms xCurrentTimeInt64
**                  answers (plus skewMs). The ledger reads time only there.
**   skewMs         added to the clock (real or set): two VFS with different
**                  skews are two machines whose clocks disagree
**   mode, n        FVFS_NONE, or on the n-th counted call (1-based) since
**                  fvfs_arm(): FVFS_WRITE fails an xWrite with
**                  SQLITE_IOERR_WRITE, FVFS_SYNC fails an xSync with
**                  SQLITE_IOERR_FSYNC, FVFS_FULL fails an xWrite with
**                  SQLITE_FULL (a full disk: the write is not done),
**                  FVFS_KILL raises SIGKILL at the n-th xWrite or xSync
**                  (the process dies mid-operation), FVFS_DROP answers
**                  SQLITE_OK to the n-th xWrite without writing (a lying
**                  disk: the control that shows the checks can fail)
**   nWrite, nSync  counted calls since fvfs_arm(), over every file the VFS
**                  opened (database, journal, WAL; the WAL index is shared
**                  memory, not I/O, and is not counted)
**   nFired         how many faults fired (each counted call from the n-th
**                  on fails while `sticky` is set, else only the n-th)
**   bKeepSynced    1: every xSync of a file copies it whole to
**                  "<file>-synced", so those copies are what a power loss
**                  would leave (writes not yet synced dropped); the test
**                  reads them as the disk after the loss
*/
#ifndef FAULTVFS_H
#define FAULTVFS_H

#include <sqlite3.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { FVFS_NONE, FVFS_WRITE, FVFS_SYNC, FVFS_FULL, FVFS_KILL, FVFS_DROP };

/* Julian day of the Unix epoch, in ms (what xCurrentTimeInt64 counts from). */
#define FVFS_EPOCH_JDMS 210866760000000LL

typedef struct FaultVfs FaultVfs;
struct FaultVfs {
  sqlite3_vfs base;
  sqlite3_vfs *pReal;
  sqlite3_int64 clockMs; /* 0: real clock */
  sqlite3_int64 skewMs;
  int mode, n, sticky;
  int nWrite, nSync, nFired;
  int bKeepSynced;
};

typedef struct FaultFile FaultFile;
struct FaultFile {
  sqlite3_file base;
  FaultVfs *pVfs;
  const char *zPath;   /* valid until xClose (SQLite keeps it) */
  sqlite3_file *pReal; /* follows this struct in the same allocation */
};

static inline void fvfs_arm(FaultVfs *p, int mode, int n, int sticky) {
  p->mode = mode;
  p->n = n;
  p->sticky = sticky;
  p->nWrite = p->nSync = p->nFired = 0;
}

/* 1 when the counted call number iCall of kind `kind` must fail. */
static inline int fvfs_fire(FaultVfs *p, int kind, int iCall) {
  if (p->mode == FVFS_NONE) return 0;
  if (p->mode == FVFS_KILL) {
    if (p->nWrite + p->nSync >= p->n) raise(SIGKILL);
    return 0;
  }
  if (p->mode != kind && !(kind == FVFS_WRITE && (p->mode == FVFS_FULL || p->mode == FVFS_DROP)))
    return 0;
  if (iCall == p->n || (p->sticky && iCall > p->n)) {
    p->nFired++;
    return 1;
  }
  return 0;
}

static int fvfsClose(sqlite3_file *f) {
  FaultFile *p = (FaultFile *)f;
  int rc = p->pReal->pMethods ? p->pReal->pMethods->xClose(p->pReal) : SQLITE_OK;
  p->base.pMethods = 0;
  return rc;
}
static int fvfsRead(sqlite3_file *f, void *z, int n, sqlite3_int64 off) {
  FaultFile *p = (FaultFile *)f;
  return p->pReal->pMethods->xRead(p->pReal, z, n, off);
}
static int fvfsWrite(sqlite3_file *f, const void *z, int n, sqlite3_int64 off) {
  FaultFile *p = (FaultFile *)f;
  FaultVfs *v = p->pVfs;
  v->nWrite++;
  if (fvfs_fire(v, FVFS_WRITE, v->nWrite)) {
    if (v->mode == FVFS_DROP) return SQLITE_OK;
    return v->mode == FVFS_FULL ? SQLITE_FULL : SQLITE_IOERR_WRITE;
  }
  return p->pReal->pMethods->xWrite(p->pReal, z, n, off);
}
static int fvfsTruncate(sqlite3_file *f, sqlite3_int64 size) {
  FaultFile *p = (FaultFile *)f;
  return p->pReal->pMethods->xTruncate(p->pReal, size);
}
/* Copy file p, as its reads see it, to "<file>-synced" (bKeepSynced). */
static int fvfs_keep_synced(FaultFile *p) {
  char zTo[1024], buf[8192];
  sqlite3_int64 size = 0, off;
  FILE *out;
  int rc = p->pReal->pMethods->xFileSize(p->pReal, &size);
  if (rc != SQLITE_OK || p->zPath == 0) return rc;
  sqlite3_snprintf((int)sizeof(zTo), zTo, "%s-synced", p->zPath);
  out = fopen(zTo, "wb");
  if (out == 0) return SQLITE_IOERR_FSYNC;
  for (off = 0; rc == SQLITE_OK && off < size; off += (sqlite3_int64)sizeof(buf)) {
    int n = size - off < (sqlite3_int64)sizeof(buf) ? (int)(size - off) : (int)sizeof(buf);
    rc = p->pReal->pMethods->xRead(p->pReal, buf, n, off);
    if (rc == SQLITE_OK && fwrite(buf, 1, (size_t)n, out) != (size_t)n) rc = SQLITE_IOERR_FSYNC;
  }
  if (fclose(out) != 0 && rc == SQLITE_OK) rc = SQLITE_IOERR_FSYNC;
  return rc;
}
static int fvfsSync(sqlite3_file *f, int flags) {
  FaultFile *p = (FaultFile *)f;
  FaultVfs *v = p->pVfs;
  int rc;
  v->nSync++;
  if (fvfs_fire(v, FVFS_SYNC, v->nSync)) return SQLITE_IOERR_FSYNC;
  rc = p->pReal->pMethods->xSync(p->pReal, flags);
  if (rc == SQLITE_OK && v->bKeepSynced) rc = fvfs_keep_synced(p);
  return rc;
}
static int fvfsFileSize(sqlite3_file *f, sqlite3_int64 *pSize) {
  FaultFile *p = (FaultFile *)f;
  return p->pReal->pMethods->xFileSize(p->pReal, pSize);
}
static int fvfsLock(sqlite3_file *f, int e) {
  FaultFile *p = (FaultFile *)f;
  return p->pReal->pMethods->xLock(p->pReal, e);
}
static int fvfsUnlock(sqlite3_file *f, int e) {
  FaultFile *p = (FaultFile *)f;
  return p->pReal->pMethods->xUnlock(p->pReal, e);
}
static int fvfsCheckReservedLock(sqlite3_file *f, int *pOut) {
  FaultFile *p = (FaultFile *)f;
  return p->pReal->pMethods->xCheckReservedLock(p->pReal, pOut);
}
static int fvfsFileControl(sqlite3_file *f, int op, void *pArg) {
  FaultFile *p = (FaultFile *)f;
  int rc = p->pReal->pMethods->xFileControl(p->pReal, op, pArg);
  if (rc == SQLITE_OK && op == SQLITE_FCNTL_VFSNAME) {
    char *zOld = *(char **)pArg;
    *(char **)pArg = sqlite3_mprintf("%s/%z", p->pVfs->base.zName, zOld);
  }
  return rc;
}
static int fvfsSectorSize(sqlite3_file *f) {
  FaultFile *p = (FaultFile *)f;
  return p->pReal->pMethods->xSectorSize(p->pReal);
}
static int fvfsDeviceCharacteristics(sqlite3_file *f) {
  FaultFile *p = (FaultFile *)f;
  return p->pReal->pMethods->xDeviceCharacteristics(p->pReal);
}
static int fvfsShmMap(sqlite3_file *f, int i, int sz, int bExtend, void volatile **pp) {
  FaultFile *p = (FaultFile *)f;
  return p->pReal->pMethods->xShmMap(p->pReal, i, sz, bExtend, pp);
}
static int fvfsShmLock(sqlite3_file *f, int off, int n, int flags) {
  FaultFile *p = (FaultFile *)f;
  return p->pReal->pMethods->xShmLock(p->pReal, off, n, flags);
}
static void fvfsShmBarrier(sqlite3_file *f) {
  FaultFile *p = (FaultFile *)f;
  p->pReal->pMethods->xShmBarrier(p->pReal);
}
static int fvfsShmUnmap(sqlite3_file *f, int del) {
  FaultFile *p = (FaultFile *)f;
  return p->pReal->pMethods->xShmUnmap(p->pReal, del);
}
static int fvfsFetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp) {
  FaultFile *p = (FaultFile *)f;
  /* no memory-mapped reads: every page goes through xRead, every write
  ** through xWrite, so the counts are the whole I/O */
  (void)p;
  (void)off;
  (void)n;
  *pp = 0;
  return SQLITE_OK;
}
static int fvfsUnfetch(sqlite3_file *f, sqlite3_int64 off, void *pPage) {
  (void)f;
  (void)off;
  (void)pPage;
  return SQLITE_OK;
}

static const sqlite3_io_methods fvfs_io = {
    3,
    fvfsClose,
    fvfsRead,
    fvfsWrite,
    fvfsTruncate,
    fvfsSync,
    fvfsFileSize,
    fvfsLock,
    fvfsUnlock,
    fvfsCheckReservedLock,
    fvfsFileControl,
    fvfsSectorSize,
    fvfsDeviceCharacteristics,
    fvfsShmMap,
    fvfsShmLock,
    fvfsShmBarrier,
    fvfsShmUnmap,
    fvfsFetch,
    fvfsUnfetch,
};

static int fvfsOpen(sqlite3_vfs *pVfs, const char *zName, sqlite3_file *f, int flags,
                    int *pOutFlags) {
  FaultVfs *v = (FaultVfs *)pVfs;
  FaultFile *p = (FaultFile *)f;
  int rc;
  p->pVfs = v;
  p->zPath = zName;
  p->pReal = (sqlite3_file *)&p[1];
  rc = v->pReal->xOpen(v->pReal, zName, p->pReal, flags, pOutFlags);
  p->base.pMethods = p->pReal->pMethods ? &fvfs_io : 0;
  return rc;
}
static int fvfsDelete(sqlite3_vfs *pVfs, const char *zName, int syncDir) {
  FaultVfs *v = (FaultVfs *)pVfs;
  return v->pReal->xDelete(v->pReal, zName, syncDir);
}
static int fvfsAccess(sqlite3_vfs *pVfs, const char *zName, int flags, int *pOut) {
  FaultVfs *v = (FaultVfs *)pVfs;
  return v->pReal->xAccess(v->pReal, zName, flags, pOut);
}
static int fvfsFullPathname(sqlite3_vfs *pVfs, const char *zName, int n, char *zOut) {
  FaultVfs *v = (FaultVfs *)pVfs;
  return v->pReal->xFullPathname(v->pReal, zName, n, zOut);
}
static void *fvfsDlOpen(sqlite3_vfs *pVfs, const char *zPath) {
  FaultVfs *v = (FaultVfs *)pVfs;
  return v->pReal->xDlOpen(v->pReal, zPath);
}
static void fvfsDlError(sqlite3_vfs *pVfs, int n, char *zOut) {
  FaultVfs *v = (FaultVfs *)pVfs;
  v->pReal->xDlError(v->pReal, n, zOut);
}
static void (*fvfsDlSym(sqlite3_vfs *pVfs, void *pH, const char *z))(void) {
  FaultVfs *v = (FaultVfs *)pVfs;
  return v->pReal->xDlSym(v->pReal, pH, z);
}
static void fvfsDlClose(sqlite3_vfs *pVfs, void *pH) {
  FaultVfs *v = (FaultVfs *)pVfs;
  v->pReal->xDlClose(v->pReal, pH);
}
static int fvfsRandomness(sqlite3_vfs *pVfs, int n, char *z) {
  FaultVfs *v = (FaultVfs *)pVfs;
  return v->pReal->xRandomness(v->pReal, n, z);
}
static int fvfsSleep(sqlite3_vfs *pVfs, int us) {
  FaultVfs *v = (FaultVfs *)pVfs;
  return v->pReal->xSleep(v->pReal, us);
}
static int fvfsCurrentTimeInt64(sqlite3_vfs *pVfs, sqlite3_int64 *pOut) {
  FaultVfs *v = (FaultVfs *)pVfs;
  int rc = SQLITE_OK;
  if (v->clockMs != 0) {
    *pOut = v->clockMs + FVFS_EPOCH_JDMS;
  } else {
    rc = v->pReal->xCurrentTimeInt64(v->pReal, pOut);
  }
  *pOut += v->skewMs;
  return rc;
}
static int fvfsCurrentTime(sqlite3_vfs *pVfs, double *pOut) {
  sqlite3_int64 t = 0;
  int rc = fvfsCurrentTimeInt64(pVfs, &t);
  *pOut = (double)t / 86400000.0;
  return rc;
}
static int fvfsGetLastError(sqlite3_vfs *pVfs, int n, char *z) {
  FaultVfs *v = (FaultVfs *)pVfs;
  return v->pReal->xGetLastError ? v->pReal->xGetLastError(v->pReal, n, z) : 0;
}

/* The Unix ms the VFS's clock shows now. */
static inline sqlite3_int64 fvfs_now(FaultVfs *p) {
  sqlite3_int64 t = 0;
  fvfsCurrentTimeInt64(&p->base, &t);
  return t - FVFS_EPOCH_JDMS;
}

static inline int fvfs_register(FaultVfs *p, const char *zName) {
  sqlite3_vfs *pReal = sqlite3_vfs_find(0);
  if (pReal == 0 || pReal->iVersion < 2) return SQLITE_ERROR;
  memset(p, 0, sizeof(*p));
  p->pReal = pReal;
  p->base.iVersion = 2;
  p->base.szOsFile = (int)sizeof(FaultFile) + pReal->szOsFile;
  p->base.mxPathname = pReal->mxPathname;
  p->base.zName = zName;
  p->base.pAppData = p;
  p->base.xOpen = fvfsOpen;
  p->base.xDelete = fvfsDelete;
  p->base.xAccess = fvfsAccess;
  p->base.xFullPathname = fvfsFullPathname;
  p->base.xDlOpen = fvfsDlOpen;
  p->base.xDlError = fvfsDlError;
  p->base.xDlSym = fvfsDlSym;
  p->base.xDlClose = fvfsDlClose;
  p->base.xRandomness = fvfsRandomness;
  p->base.xSleep = fvfsSleep;
  p->base.xCurrentTime = fvfsCurrentTime;
  p->base.xGetLastError = fvfsGetLastError;
  p->base.xCurrentTimeInt64 = fvfsCurrentTimeInt64;
  return sqlite3_vfs_register(&p->base, 0);
}

#endif /* FAULTVFS_H */
