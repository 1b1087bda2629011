// The NCCL network plugin ABI, version 8 (ncclNet_v8, NCCL 2.19 and later): the types
// NCCL and a net plugin share, declared here because a plugin carries its own copy of the
// definitions it implements (NCCL is not installed where the plugin is built).
// NCCL loads libnccl-net-<NCCL_NET_PLUGIN>.so and looks up the symbol `ncclNetPlugin_v8`
// (a ncclNet_v8_t).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,    // a system or network call failed
  ncclInternalError = 3,  // NCCL used the plugin wrongly (bad comm, too many requests)
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,  // most likely the user's error (a message larger than its receive)
  ncclRemoteError = 6,   // the peer failed or cannot be reached
  ncclInProgress = 7
} ncclResult_t;

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

// Subsystem flags of a log line (NCCL_DEBUG_SUBSYS).
enum : unsigned long { NCCL_INIT = 1, NCCL_NET = 16 };

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                  int line, const char* fmt, ...);

// Bytes of the opaque handle listen() fills and connect() reads (NCCL copies it between
// ranks through its bootstrap).
#define NCCL_NET_HANDLE_MAXSIZE 128

// Memory kinds (ptrSupport, regMr's type).
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

// Requests NCCL may have outstanding on one comm; a send comm must take this many times
// maxRecvs sends (each grouped receive matches up to maxRecvs of them).
#define NCCL_NET_MAX_REQUESTS 32

typedef enum { NCCL_NET_DEVICE_HOST = 0, NCCL_NET_DEVICE_UNPACK = 1 } ncclNetDeviceType;

typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v8_t;

typedef struct {
  char* name;       // for logs
  char* pciPath;    // the device's PCI directory in /sys; null for a virtual device
  uint64_t guid;    // devices with one guid share one port to the fabric
  int ptrSupport;   // NCCL_PTR_* bits
  int regIsGlobal;  // 1: a registration is not tied to the comm it was made on
  int speed;        // port speed, Mbit/s
  int port;
  float latency;  // us
  int maxComms;
  int maxRecvs;  // largest n of a grouped irecv
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t* props);
  // Never blocks; fills `handle` for the connecting side.
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  // Never block: success with a null comm means "call again".
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v8_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_v8_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  // Success with a null request means "cannot start now, call again".
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle,
                        void** request);
  // A grouped receive of n buffers; sends match the first posted receive in order, the
  // tag choosing among its n buffers. A receive may be larger than its send, not smaller.
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  // done = 1 once complete; then sizes[] holds the bytes sent / received per buffer and
  // the request is NCCL's no longer.
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} ncclNet_v8_t;

}  // extern "C"
