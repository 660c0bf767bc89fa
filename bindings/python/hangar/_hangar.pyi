# The generated extension (bindings/python/hangar.i), typed for mypy. It is
# private: the package's modules are the API and the only callers.
#
# Handles are SWIG pointer objects; each kind has its own class here (they
# exist only for type checking) so that a sandbox cannot be passed where a
# context is expected. A function with an output parameter returns a
# two-item list [code, value], typed as a tuple for its shape. A negative
# code is never returned: it is raised as the HangarError of its kind.
#
# tests/python/test_stub.py holds this file to the extension: the same
# names, the same number of arguments, the same keys in the dicts the
# helpers build, and every name the package calls declared here.

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypedDict, type_check_only

from _typeshed import ReadableBuffer

# ---- handles -------------------------------------------------------------------------

@type_check_only
class _Ctx: ...
@type_check_only
class _Provider: ...
@type_check_only
class _Sandbox: ...
@type_check_only
class _Process: ...
@type_check_only
class _Session: ...
@type_check_only
class _Checkpoint: ...

# A Python callable held for the library (pycb_new()) until pycb_free().
@type_check_only
class _Callback: ...

# ---- what the helpers pass to callbacks and return -----------------------------------

@type_check_only
class _ErrorDetails(TypedDict):
    code: int
    name: str
    message: str
    category: int
    os_errno: int
    http_status: int
    provider_code: str
    retry_after: int
    flags: int

@type_check_only
class _SandboxInfoDict(TypedDict):
    id: str
    provider: str
    template_id: str
    state: int
    created_at_us: int
    expires_at_us: int

@type_check_only
class _FileInfoDict(TypedDict):
    name: str
    path: str
    type: int
    mode: int
    bytes: int
    mtime_us: int
    owner: Optional[str]
    group: Optional[str]
    permissions: Optional[str]
    symlink_target: Optional[str]

@type_check_only
class _MetricDict(TypedDict):
    timestamp_us: int
    cpu_count: int
    cpu_used_pct: float
    mem_used_bytes: int
    mem_total_bytes: int
    disk_used_bytes: int
    disk_total_bytes: int
    pids_used: int
    pids_max: int

@type_check_only
class _LogEntryDict(TypedDict):
    timestamp_us: int
    level: str
    message: str

# A fork's sandbox and session are borrowed: take a reference to keep them.
@type_check_only
class _ForkDict(TypedDict):
    index: int
    error: int
    message: Optional[str]
    sandbox: Optional[_Sandbox]

@type_check_only
class _SessionForkDict(TypedDict):
    index: int
    error: int
    method: int
    message: Optional[str]
    session: Optional[_Session]

@type_check_only
class _CheckpointInfoDict(TypedDict):
    id: str
    session_id: str
    parent_id: str
    workspace: str
    selection: str
    store_url: str
    content_hash: str
    labels_json: Optional[str]
    created_at_us: int
    stored_bytes: int
    archive_bytes: int
    files: int
    blob_bytes: int

@type_check_only
class _SessionInfoDict(TypedDict):
    id: str
    state: int
    last_resume: int
    last_resume_reason: str
    suspend_reason: str
    environment: str
    workspace: str
    provider: str
    sandbox_id: str
    checkpoint_id: str
    parent_id: str
    fork_group: str
    labels_json: Optional[str]
    flags: int
    created_at_us: int
    updated_at_us: int
    parked_since_us: int

@type_check_only
class _TierDict(TypedDict):
    name: str
    falls_back: bool
    hedge_ms: int
    providers: List[str]
    cooling_until_us: List[int]
    loaded: List[bool]

@type_check_only
class _EnvironmentDict(TypedDict):
    name: str
    description: str
    tier: str
    workspace: str
    user: str
    timeout_sec: int
    network: int
    templates_json: str
    env_json: str
    image: str

@type_check_only
class _TemplateDict(TypedDict):
    template_id: str
    name: str
    status: str
    provider: str

@type_check_only
class _SnapshotDict(TypedDict):
    snapshot_id: str
    name: str
    sandbox_id: str
    provider: str
    created_at_us: int
    released: bool

@type_check_only
class _ImageDict(TypedDict):
    digest: str
    names: List[str]
    config_digest: str
    os: str
    architecture: str
    size_bytes: int
    layers: List[str]
    env: List[str]
    workdir: str
    user: str
    created_us: int
    in_use: bool

@type_check_only
class _ReapDict(TypedDict):
    leader: bool
    sessions_reaped: int
    records_forgotten: int
    lease_expires_us: int

# fn((stream, data)): STDOUT, STDERR or PTY and the bytes that arrived. Typed
# loosely: mypy 1.0 cannot infer a lambda with a default argument (as
# Sandbox.exec passes) against Callable[[Tuple[int, bytes]], object].
_Output = Callable[..., object]
# (done, total) bytes; a true result cancels the call.
_Progress = Callable[[Tuple[int, int]], object]
# Polled while a call runs; a true result cancels it.
_Cancel = Callable[[], object]

# ---- errors and callback holders -------------------------------------------------------

def set_error_factory(fn: Callable[[_ErrorDetails], BaseException]) -> None: ...
def pycb_new(fn: Callable[[Any], object]) -> _Callback: ...
def pycb_check(cb: Optional[_Callback]) -> int: ...
def pycb_free(cb: Optional[_Callback]) -> None: ...
def hangar_error_name(code: int) -> str: ...
def hangar_strerror(code: int) -> str: ...
def hangar_version() -> str: ...
def hangar_version_number() -> int: ...

# ---- contexts and providers ---------------------------------------------------------------

def hangar_ctx_new(flags: int) -> Tuple[int, _Ctx]: ...
def hangar_ctx_ref(ctx: _Ctx) -> _Ctx: ...
def hangar_ctx_unref(ctx: Optional[_Ctx]) -> None: ...
def hangar_ctx_set(ctx: _Ctx, name: str, value: Optional[str]) -> int: ...
def hangar_ctx_get(ctx: _Ctx, name: str) -> Tuple[int, bytes]: ...
def hangar_ctx_ping_store(ctx: _Ctx) -> int: ...
def hangar_ctx_reap_release(ctx: _Ctx, lease: str) -> Tuple[int, bool]: ...
def py_ctx_reap(ctx: _Ctx, lease: str, lease_seconds: int) -> _ReapDict: ...
def py_ctx_set_event(ctx: _Ctx, cb: Optional[_Callback]) -> None: ...
def py_ctx_set_log(ctx: _Ctx, max_level: int, cb: Optional[_Callback]) -> None: ...
# fn((name, value, source)) for each setting; secrets masked.
def py_ctx_settings(ctx: _Ctx, provider: Optional[str], all: int,
                    fn: Callable[[Tuple[str, str, int]], object]) -> int: ...

def hangar_provider_lookup(ctx: _Ctx, name: Optional[str]) -> Tuple[int, _Provider]: ...
def hangar_provider_ref(p: _Provider) -> _Provider: ...
def hangar_provider_unref(p: Optional[_Provider]) -> None: ...
def hangar_provider_name(p: _Provider) -> str: ...
def hangar_provider_capabilities(p: _Provider) -> int: ...
# fn(provider) with a borrowed handle, built-in providers first.
def py_provider_foreach(ctx: _Ctx, fn: Callable[[_Provider], object]) -> int: ...
def py_tier_foreach(ctx: _Ctx, fn: Callable[[_TierDict], object]) -> int: ...
# name None: every environment; else only that one (NotFoundError).
def py_environment_list(ctx: _Ctx, name: Optional[str], fn: Callable[[_EnvironmentDict], object]) -> int: ...
def py_template_list(ctx: _Ctx, provider: Optional[str], fn: Callable[[_TemplateDict], object]) -> int: ...
def py_snapshot_list(ctx: _Ctx, provider: Optional[str], fn: Callable[[_SnapshotDict], object]) -> int: ...
# Returns the new template's id; fn((status, message)) follows the build.
@type_check_only
class _PublishDict(TypedDict):
    provider: str
    action: str
    template_id: str
    digest: str
    error: int
    message: str

def py_environment_publish(ctx: _Ctx, name: str, rebuild: int, fn: Callable[[_PublishDict], object],
                           progress: Optional[Callable[[Tuple[str, str]], object]]) -> int: ...
def py_template_build(ctx: _Ctx, provider: Optional[str], name: str, image: str, cpu_millis: int,
                      memory_mb: int, disk_mb: int, fn: Optional[Callable[[Tuple[str, str]], object]]) -> str: ...

# ---- the image store ------------------------------------------------------------------

# Returns the image's digest; fn((phase, layer, layers_done, layers_total, bytes_done, bytes_total)).
def py_image_import(ctx: _Ctx, path: str, name: Optional[str],
                    fn: Optional[Callable[[Tuple[str, str, int, int, int, int]], object]]) -> str: ...
# Returns the image's digest; fn as py_image_import's; cancel asked while the pull runs.
def py_image_pull(ctx: _Ctx, reference: str, fn: Optional[Callable[[Tuple[str, str, int, int, int, int]], object]],
                  cancel: Optional[Callable[[], object]]) -> str: ...
# ref None: every image, newest first; else only that one (NotFoundError).
def py_image_list(ctx: _Ctx, ref: Optional[str], fn: Callable[[_ImageDict], object]) -> int: ...
def hangar_image_remove(ctx: _Ctx, ref: str) -> int: ...
# Returns the bytes freed.
def py_image_gc(ctx: _Ctx, max_bytes: int) -> int: ...

# ---- sandboxes ------------------------------------------------------------------------

def py_sandbox_create(ctx: _Ctx, provider: Optional[str], template_id: Optional[str], timeout_sec: int,
                      env: Optional[Sequence[str]], network: int, tier: Optional[str],
                      environment: Optional[str]) -> _Sandbox: ...
def hangar_sandbox_attach(ctx: _Ctx, provider: Optional[str], id: str) -> Tuple[int, _Sandbox]: ...
def hangar_sandbox_ref(sb: _Sandbox) -> _Sandbox: ...
def hangar_sandbox_unref(sb: Optional[_Sandbox]) -> None: ...
def hangar_sandbox_id(sb: _Sandbox) -> str: ...
# Borrowed: valid while the sandbox handle is.
def hangar_sandbox_provider(sb: _Sandbox) -> _Provider: ...
def py_sandbox_provider_name(sb: _Sandbox) -> str: ...
def py_sandbox_get_info(sb: _Sandbox) -> _SandboxInfoDict: ...
# (url, socket_path, access_token, headers)
def py_sandbox_envd_endpoint(sb: _Sandbox) -> Tuple[str, str, str, List[str]]: ...
# (url, headers)
def py_sandbox_port_endpoint(sb: _Sandbox, port: int) -> Tuple[str, List[str]]: ...
def py_sandbox_list(ctx: _Ctx, provider: Optional[str], fn: Callable[[_SandboxInfoDict], object]) -> int: ...
# (exit_code, timed_out, stdout, stderr, stdout_bytes, stderr_bytes, duration_us, oom_killed)
def py_sandbox_exec(sb: _Sandbox, command: str, timeout_sec: int, cwd: Optional[str], user: Optional[str],
                    env: Optional[Sequence[str]], output_limit: int, stdin_data: Optional[ReadableBuffer],
                    fn: Optional[_Output],
                    cancel: Optional[_Cancel]) -> Tuple[int, int, bytes, bytes, int, int, int, int]: ...
def hangar_sandbox_read_file(sb: _Sandbox, path: str) -> Tuple[int, bytes]: ...
def hangar_sandbox_write_file(sb: _Sandbox, path: str, data: ReadableBuffer) -> int: ...
def hangar_sandbox_copy_in(sb: _Sandbox, local_path: str, remote_path: str) -> int: ...
def py_sandbox_copy_out(sb: _Sandbox, remote_path: str, local_path: str, limit_bytes: int, timeout_sec: int,
                        cancel: Optional[_Cancel]) -> int: ...
# stat_only: describe path itself (depth unused).
def py_sandbox_list_files(sb: _Sandbox, path: str, depth: int, stat_only: int,
                          fn: Callable[[_FileInfoDict], object]) -> int: ...
# 1 when the path exists, 0 when not.
def hangar_sandbox_exists(sb: _Sandbox, path: str) -> int: ...
def hangar_sandbox_mkdir(sb: _Sandbox, path: str) -> int: ...
def hangar_sandbox_rename(sb: _Sandbox, src: str, dst: str) -> int: ...
def hangar_sandbox_remove(sb: _Sandbox, path: str) -> int: ...
def hangar_sandbox_pause(sb: _Sandbox) -> int: ...
def hangar_sandbox_pause_filesystem(sb: _Sandbox) -> int: ...
def hangar_sandbox_resume(sb: _Sandbox) -> int: ...
def hangar_sandbox_set_timeout(sb: _Sandbox, seconds: int) -> int: ...
def hangar_sandbox_kill(sb: _Sandbox) -> int: ...
def hangar_sandbox_snapshot(sb: _Sandbox, name: Optional[str]) -> Tuple[int, bytes]: ...
def hangar_snapshot_delete(ctx: _Ctx, provider: Optional[str], snapshot_id: str) -> int: ...
def hangar_snapshot_release(ctx: _Ctx, provider: Optional[str], snapshot_id: str) -> int: ...
def py_sandbox_fork(sb: _Sandbox, count: int, fn: Callable[[_ForkDict], object]) -> int: ...
def py_sandbox_metrics(sb: _Sandbox, fn: Callable[[_MetricDict], object]) -> int: ...
def py_sandbox_logs(sb: _Sandbox, fn: Callable[[_LogEntryDict], object]) -> int: ...
def hangar_sandbox_expose_port(sb: _Sandbox, port: int) -> Tuple[int, bytes]: ...

# ---- processes --------------------------------------------------------------------------

# pid non-zero: attach to that process (command unused). cb receives
# (stream, data) until the handle is released.
def py_process_start(sb: _Sandbox, command: Optional[str], pid: int, cwd: Optional[str], user: Optional[str],
                     env: Optional[Sequence[str]], pty: int, cols: int, rows: int, stdin_enabled: int,
                     timeout_sec: int, cb: Optional[_Callback]) -> _Process: ...
def hangar_process_ref(p: _Process) -> _Process: ...
def hangar_process_unref(p: Optional[_Process]) -> None: ...
def hangar_process_pid(p: _Process) -> int: ...
def hangar_process_write(p: _Process, data: ReadableBuffer) -> int: ...
def hangar_process_close_stdin(p: _Process) -> int: ...
def hangar_process_resize(p: _Process, cols: int, rows: int) -> int: ...
def hangar_process_signal(p: _Process, sig: int) -> int: ...
# timeout_ms -1: no deadline. The value is the exit status.
def hangar_process_wait(p: _Process, timeout_ms: int) -> Tuple[int, int]: ...

# ---- checkpoints ------------------------------------------------------------------------

def py_checkpoint_create(sb: _Sandbox, workspace: Optional[str], select: int, flags: int,
                         session_id: Optional[str], parent_id: Optional[str], blob: Optional[ReadableBuffer],
                         labels: Optional[Sequence[str]], user: Optional[str], timeout_sec: int,
                         fn: Optional[_Progress]) -> _Checkpoint: ...
def hangar_checkpoint_lookup(ctx: _Ctx, id: str) -> Tuple[int, _Checkpoint]: ...
# fn(checkpoint) with a borrowed handle, oldest first.
def py_checkpoint_list(ctx: _Ctx, session_id: Optional[str], fn: Callable[[_Checkpoint], object]) -> int: ...
def hangar_checkpoint_ref(cp: _Checkpoint) -> _Checkpoint: ...
def hangar_checkpoint_unref(cp: Optional[_Checkpoint]) -> None: ...
def hangar_checkpoint_id(cp: _Checkpoint) -> str: ...
def py_checkpoint_get_info(cp: _Checkpoint) -> _CheckpointInfoDict: ...
def hangar_checkpoint_read_blob(cp: _Checkpoint) -> Tuple[int, bytes]: ...
def hangar_checkpoint_delete(cp: _Checkpoint) -> int: ...
# sb None: export to local_path instead of restoring into sb.
def py_checkpoint_restore(sb: Optional[_Sandbox], cp: _Checkpoint, local_path: Optional[str],
                          workspace: Optional[str], flags: int, user: Optional[str], timeout_sec: int,
                          fn: Optional[_Progress]) -> int: ...

# ---- sessions ---------------------------------------------------------------------------

def py_session_create(ctx: _Ctx, id: Optional[str], environment: Optional[str], provider: Optional[str],
                      template_id: Optional[str], timeout_sec: int, env: Optional[Sequence[str]], network: int,
                      tier: Optional[str], workspace: Optional[str], user: Optional[str],
                      labels: Optional[Sequence[str]], flags: int) -> _Session: ...
def hangar_session_open(ctx: _Ctx, id: str) -> Tuple[int, _Session]: ...
def py_session_list(ctx: _Ctx, fn: Callable[[_SessionInfoDict], object]) -> int: ...
def hangar_session_ref(s: _Session) -> _Session: ...
def hangar_session_unref(s: Optional[_Session]) -> None: ...
def hangar_session_id(s: _Session) -> str: ...
def py_session_get_info(s: _Session) -> _SessionInfoDict: ...
def hangar_session_sandbox(s: _Session) -> Tuple[int, _Sandbox]: ...
def py_session_suspend(s: _Session, blob: Optional[ReadableBuffer], labels: Optional[Sequence[str]], flags: int,
                       timeout_sec: int) -> int: ...
def hangar_session_resume(s: _Session) -> Tuple[int, _Sandbox]: ...
def hangar_session_archive(s: _Session) -> int: ...
def hangar_session_delete(s: _Session) -> int: ...
def py_session_fork(s: _Session, count: int, fn: Callable[[_SessionForkDict], object],
                    cancel: Optional[Callable[[], object]]) -> int: ...
# The value is how many other forks of the group were archived.
def hangar_session_keep(s: _Session) -> Tuple[int, int]: ...
# The value is how many parked sandboxes were destroyed.
def hangar_session_reap(ctx: _Ctx) -> Tuple[int, int]: ...
# fn((session, sandbox, hook)) with borrowed handles; a true result refuses.
def py_session_set_hook(ctx: _Ctx, cb: Optional[_Callback]) -> None: ...

# ---- hangar.aio's hand-off --------------------------------------------------------------

@type_check_only
class _AioPort: ...
@type_check_only
class _AioJob: ...

# (port, its eventfd): the loop watches the fd; the port closes it.
def aio_port_new() -> Tuple[_AioPort, int]: ...
# py_sandbox_exec() without callbacks, on the extension's threads; its end comes out of aio_port_drain() with token.
def aio_exec(port_cap: _AioPort, token: Any, sb: _Sandbox, command: str, timeout_sec: int, cwd: Optional[str],
             user: Optional[str], env: Optional[Sequence[str]], output_limit: int,
             stdin_data: Optional[ReadableBuffer]) -> _AioJob: ...
def aio_cancel(job_cap: _AioJob) -> None: ...
# (token, ran, py_sandbox_exec()'s tuple or None, the HangarError or None) for each job that ended.
def aio_port_drain(port_cap: _AioPort) -> List[Tuple[Any, int, Optional[Tuple[int, int, bytes, bytes, int, int, int, int]],
                                                     Optional[BaseException]]]: ...

# ---- constants of the public headers ------------------------------------------------------

HANGAR_CHECKPOINT_INFO_VERSION: int
HANGAR_CHECKPOINT_NO_NATIVE: int
HANGAR_CHECKPOINT_OPTS_VERSION: int
HANGAR_CHECKPOINT_SELECT_ALL: int
HANGAR_CHECKPOINT_SELECT_AUTO: int
HANGAR_COPY_OPTS_VERSION: int
HANGAR_CREATE_OPTS_VERSION: int
HANGAR_CTX_NO_ENV: int
HANGAR_EBUSY: int
HANGAR_ECANCELED: int
HANGAR_ECAPACITY: int
HANGAR_ECONFIG: int
HANGAR_ECREATE: int
HANGAR_EEXISTS: int
HANGAR_EFILE: int
HANGAR_EGONE: int
HANGAR_EINVAL: int
HANGAR_ENOMEM: int
HANGAR_ENOTFOUND: int
HANGAR_ENVD_ENDPOINT_VERSION: int
HANGAR_ENVIRONMENT_INFO_VERSION: int
HANGAR_EOS: int
HANGAR_EPAUSED: int
HANGAR_EPROTOCOL: int
HANGAR_EREFUSED: int
HANGAR_ERRCAT_ARGUMENT: int
HANGAR_ERRCAT_CONFIG: int
HANGAR_ERRCAT_NET: int
HANGAR_ERRCAT_NONE: int
HANGAR_ERRCAT_OS: int
HANGAR_ERRCAT_PROVIDER: int
HANGAR_ERRCAT_SANDBOX: int
HANGAR_ERROR_UNREACHABLE: int
HANGAR_ETIMEOUT: int
HANGAR_ETOOLARGE: int
HANGAR_EUNAVAILABLE: int
HANGAR_EUNSUPPORTED: int
HANGAR_EXEC_OPTS_VERSION: int
HANGAR_EXEC_RESULT_VERSION: int
HANGAR_FILE_DIRECTORY: int
HANGAR_FILE_INFO_VERSION: int
HANGAR_FILE_OTHER: int
HANGAR_FILE_REGULAR: int
HANGAR_FORK_CHECKPOINT: int
HANGAR_FORK_NATIVE: int
HANGAR_FORK_RESULT_VERSION: int
HANGAR_FORK_SNAPSHOT: int
HANGAR_IMAGE_INFO_VERSION: int
HANGAR_IMAGE_OPTS_VERSION: int
HANGAR_IMAGE_PROGRESS_VERSION: int
HANGAR_LOG_DEBUG: int
HANGAR_LOG_ERROR: int
HANGAR_LOG_INFO: int
HANGAR_LOG_WARNING: int
HANGAR_NETWORK_DEFAULT: int
HANGAR_NETWORK_OFF: int
HANGAR_NETWORK_ON: int
HANGAR_OK: int
HANGAR_PORT_ENDPOINT_VERSION: int
HANGAR_PROCESS_OPTS_VERSION: int
HANGAR_PUBLISH_OPTS_VERSION: int
HANGAR_PUBLISH_RESULT_VERSION: int
HANGAR_REAP_RESULT_VERSION: int
HANGAR_RESTORE_MERGE: int
HANGAR_RESTORE_NO_NATIVE: int
HANGAR_RESTORE_OPTS_VERSION: int
HANGAR_RESUME_COLD: int
HANGAR_RESUME_FRESH: int
HANGAR_RESUME_HOT: int
HANGAR_RESUME_NONE: int
HANGAR_SANDBOX_INFO_VERSION: int
HANGAR_SANDBOX_LOG_ENTRY_VERSION: int
HANGAR_SANDBOX_METRIC_VERSION: int
HANGAR_SANDBOX_PAUSED: int
HANGAR_SANDBOX_RUNNING: int
HANGAR_SESSION_ACTIVE: int
HANGAR_SESSION_ARCHIVED: int
HANGAR_SESSION_EXCLUSIVE_CREDENTIAL: int
HANGAR_SESSION_FORK_OPTS_VERSION: int
HANGAR_SESSION_FORK_RESULT_VERSION: int
HANGAR_SESSION_HOOK_COLD: int
HANGAR_SESSION_HOOK_PARK: int
HANGAR_SESSION_HOOK_WAKE: int
HANGAR_SESSION_INFO_VERSION: int
HANGAR_SESSION_OPTS_VERSION: int
HANGAR_SESSION_PARKED: int
HANGAR_SESSION_SUSPENDED: int
HANGAR_SETTING_DEFAULT: int
HANGAR_SETTING_ENVIRONMENT: int
HANGAR_SETTING_EXPLICIT: int
HANGAR_SIGKILL: int
HANGAR_SIGTERM: int
HANGAR_SNAPSHOT_INFO_VERSION: int
HANGAR_STREAM_PTY: int
HANGAR_STREAM_STDERR: int
HANGAR_STREAM_STDOUT: int
HANGAR_SUSPEND_NO_PARK: int
HANGAR_SUSPEND_OPTS_VERSION: int
HANGAR_TEMPLATE_BUILD_OPTS_VERSION: int
HANGAR_TEMPLATE_INFO_VERSION: int
HANGAR_TIER_INFO_VERSION: int
HANGAR_VERSION_MAJOR: int
HANGAR_VERSION_MINOR: int
HANGAR_VERSION_NUMBER: int
HANGAR_VERSION_PATCH: int
HANGAR_VERSION_STRING: str
