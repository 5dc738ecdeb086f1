package runtimepb

// The translation between the wire's types (this package) and core's, in one
// place: what crosses a plugin's or the daemon's connection becomes a core
// type here and nowhere else, on the host's side (Runtime) as on the
// plugin's (core/plugin's adapter). The ending's translation is
// core/ending's. Each pair is lossless for what core's type carries; a
// test (translate_test.go) round-trips every field.

import (
	"io/fs"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
)

// ResultFromProto converts the wire result.
func ResultFromProto(r *Result) *core.Result {
	if r == nil {
		return &core.Result{EndedBy: ending.Crashed, ExitCode: -1, Error: "no result"}
	}
	res := &core.Result{
		Stdout:          string(r.GetStdout()),
		Stderr:          string(r.GetStderr()),
		StdoutOmitted:   r.GetStdoutOmitted(),
		StderrOmitted:   r.GetStderrOmitted(),
		ExitCode:        int(r.GetExitCode()),
		Signal:          r.GetSignal(),
		Error:           r.GetError(),
		DurationMs:      r.GetDurationMs(),
		EndedBy:         EndedByFromProto(r.GetEndedBy()),
		StateLost:       r.GetStateLost(),
		FilesOmitted:    r.GetFilesOmitted(),
		FuelConsumed:    r.GetFuelConsumed(),
		MemoryUsedBytes: r.GetMemoryUsedBytes(),
		Backend:         r.GetBackend(),
		Isolation:       r.GetIsolation(),
		WorkspacePath:   r.GetWorkspacePath(),
		InstallMs:       r.GetInstallMs(),
		InstallCached:   r.GetInstallCached(),
		Value:           r.Value,
		Duration:        time.Duration(r.GetDurationUs()) * time.Microsecond,
	}
	if res.Duration == 0 {
		res.Duration = time.Duration(res.DurationMs) * time.Millisecond
	}
	res.StdoutBase64, res.StderrBase64 = core.Base64IfBinary(r.GetStdout()), core.Base64IfBinary(r.GetStderr())
	res.TimedOut = res.EndedBy == ending.Timeout
	res.Truncated = res.StdoutOmitted > 0 || res.StderrOmitted > 0
	res.Files = FilesFromProto(r.GetFiles())
	if c := r.GetCompile(); c != nil {
		res.Compile = core.CompileOf(ResultFromProto(c))
		res.Compile.Cached = c.GetCached()
	}
	return res
}

// ResultProto converts a result for the wire. The fields ResultFromProto derives
// (TimedOut, Truncated, the base64 forms) do not travel; a DurationMs of 0
// is taken from Duration, so a runtime sets either.
func ResultProto(r *core.Result) *Result {
	if r == nil {
		return nil
	}
	ms := r.DurationMs
	if ms == 0 {
		ms = r.Duration.Milliseconds()
	}
	return &Result{
		Stdout:          []byte(r.Stdout),
		Stderr:          []byte(r.Stderr),
		StdoutOmitted:   r.StdoutOmitted,
		StderrOmitted:   r.StderrOmitted,
		ExitCode:        int32(r.ExitCode),
		Signal:          r.Signal,
		Error:           r.Error,
		DurationMs:      ms,
		DurationUs:      r.Duration.Microseconds(),
		EndedBy:         EndedByProto(r.EndedBy),
		StateLost:       r.StateLost,
		Files:           filesProto(r.Files),
		FilesOmitted:    r.FilesOmitted,
		FuelConsumed:    r.FuelConsumed,
		MemoryUsedBytes: r.MemoryUsedBytes,
		Backend:         r.Backend,
		Isolation:       r.Isolation,
		WorkspacePath:   r.WorkspacePath,
		InstallMs:       r.InstallMs,
		InstallCached:   r.InstallCached,
		Value:           r.Value,
		Compile:         compileProto(r.Compile),
	}
}

// compileProto carries a compile step as a wire Result.
func compileProto(c *core.CompileResult) *Result {
	if c == nil {
		return nil
	}
	return &Result{
		Stdout: []byte(c.Stdout), Stderr: []byte(c.Stderr), ExitCode: int32(c.ExitCode), Signal: c.Signal,
		Error: c.Error, DurationMs: c.DurationMs, DurationUs: c.Duration.Microseconds(),
		EndedBy: EndedByProto(c.EndedBy), MemoryUsedBytes: c.MemoryUsedBytes, Cached: c.Cached,
	}
}

// ProgramProto converts a program for the wire; the caller names the
// runtime (RunRequest.runtime), which core's Program does not carry.
func ProgramProto(p core.Program) *RunRequest {
	return &RunRequest{
		Code: []byte(p.Code), Files: filesProto(p.Files), Stdin: p.Stdin, Args: Bytes(p.Args), Env: EnvBytes(p.Env),
		Requirements: p.Requirements, Install: installProto(p.Install), Limits: LimitsProto(p.Limits),
		Context: contextProto(p.Context), ReturnFiles: p.ReturnFiles,
	}
}

// ProgramFromProto converts a wire request.
func ProgramFromProto(req *RunRequest) core.Program {
	return core.Program{
		Code: string(req.GetCode()), Files: FilesFromProto(req.GetFiles()), Stdin: req.GetStdin(),
		Args: Strings(req.GetArgs()), Env: EnvStrings(req.GetEnv()), Requirements: req.GetRequirements(),
		Install: installFromProto(req.GetInstall()), Limits: LimitsFromProto(req.GetLimits()),
		Context: contextFromProto(req.GetContext()), ReturnFiles: req.GetReturnFiles(),
	}
}

// SessionProto is a session's open message. Bridges and ReturnFiles stay
// with the host: callbacks and file requests travel per cell.
func SessionProto(o core.SessionOptions) *OpenSession {
	return &OpenSession{Context: contextProto(o.Context), Limits: LimitsProto(o.Limits), Env: EnvBytes(o.Env), Runtime: o.Runtime,
		Requirements: o.Requirements, Install: installProto(o.Install)}
}

// SessionFromProto converts an open message.
func SessionFromProto(o *OpenSession) core.SessionOptions {
	return core.SessionOptions{Runtime: o.GetRuntime(), Context: contextFromProto(o.GetContext()), Limits: LimitsFromProto(o.GetLimits()), Env: EnvStrings(o.GetEnv()),
		Requirements: o.GetRequirements(), Install: installFromProto(o.GetInstall())}
}

// LimitsProto converts limits for the wire. Strict is the host's and does
// not travel.
func LimitsProto(l core.Limits) *Limits {
	return &Limits{
		WallMs:           WireMs(l.Wall),
		CpuMs:            WireMs(l.CPU),
		MemoryBytes:      l.MemoryBytes,
		MaxProcesses:     l.MaxProcesses,
		MaxOutputBytes:   l.MaxOutputBytes,
		MaxFileBytes:     l.MaxFileBytes,
		MaxDiskBytes:     l.MaxDiskBytes,
		Fuel:             l.Fuel,
		AllowNetwork:     l.AllowNetwork,
		Isolation:        l.Isolation,
		InstallTimeoutMs: WireMs(l.InstallTimeout),
		MaxFiles:         l.MaxFiles,
	}
}

// WireMs is d in whole milliseconds, as the wire carries a limit's
// duration, and never 0 when d is positive: 0 on the wire means "the
// default", so truncating a --timeout of 500us would run the program for
// the 30 s default instead. A positive duration under a millisecond
// becomes 1 ms (POST /execute rounds timeout_seconds the same way).
func WireMs(d time.Duration) int64 {
	if d > 0 && d < time.Millisecond {
		return 1
	}
	return d.Milliseconds()
}

// LimitsFromProto converts wire limits (nil: all zero, the defaults).
func LimitsFromProto(l *Limits) core.Limits {
	return core.Limits{
		Wall:           time.Duration(l.GetWallMs()) * time.Millisecond,
		CPU:            time.Duration(l.GetCpuMs()) * time.Millisecond,
		MemoryBytes:    l.GetMemoryBytes(),
		MaxProcesses:   l.GetMaxProcesses(),
		MaxOutputBytes: l.GetMaxOutputBytes(),
		MaxFileBytes:   l.GetMaxFileBytes(),
		MaxDiskBytes:   l.GetMaxDiskBytes(),
		Fuel:           l.GetFuel(),
		AllowNetwork:   l.GetAllowNetwork(),
		Isolation:      l.GetIsolation(),
		InstallTimeout: time.Duration(l.GetInstallTimeoutMs()) * time.Millisecond,
		MaxFiles:       l.GetMaxFiles(),
	}
}

// filesProto converts files for the wire.
func filesProto(files []core.File) []*File {
	var out []*File
	for _, f := range files {
		out = append(out, &File{Path: f.Path, Data: f.Data, Size: f.Size, Change: f.Change, Mode: uint32(f.Mode.Perm())})
	}
	return out
}

// FilesFromProto converts wire files.
func FilesFromProto(files []*File) []core.File {
	var out []core.File
	for _, f := range files {
		out = append(out, core.File{Path: f.GetPath(), Size: f.GetSize(), Change: f.GetChange(), Data: f.GetData(), Mode: fs.FileMode(f.GetMode()).Perm()})
	}
	return out
}

func contextProto(c *core.Context) *Context {
	if c == nil {
		return nil
	}
	k := c.Kind
	if k == "" {
		k = "text"
	}
	return &Context{Data: c.Data, Kind: k}
}

func contextFromProto(c *Context) *core.Context {
	if c == nil {
		return nil
	}
	return &core.Context{Data: c.GetData(), Kind: c.GetKind()}
}

func installProto(o *core.InstallOptions) *InstallOptions {
	if o == nil {
		return nil
	}
	return &InstallOptions{IndexUrl: o.IndexURL, FindLinks: o.FindLinks, NoIndex: o.NoIndex, NpmRegistry: o.NPMRegistry}
}

func installFromProto(o *InstallOptions) *core.InstallOptions {
	if o == nil {
		return nil
	}
	return &core.InstallOptions{IndexURL: o.GetIndexUrl(), FindLinks: o.GetFindLinks(), NoIndex: o.GetNoIndex(), NPMRegistry: o.GetNpmRegistry()}
}

// InfoProto converts a runtime's declaration for the wire.
func InfoProto(i core.Info) *InfoResponse {
	return &InfoResponse{
		Name: i.Name, PluginVersion: i.PluginVersion, Language: i.Language,
		FileExtension: i.FileExtension, RuntimeVersion: i.RuntimeVersion,
		Capabilities: i.Capabilities, Available: i.Available,
		UnavailableReason: i.UnavailableReason, Backend: i.Backend,
		IsolationLevels: i.IsolationLevels, SessionIsolationLevels: i.SessionIsolationLevels,
	}
}

// InfoFromProto converts the wire's declaration.
func InfoFromProto(i *InfoResponse) *core.Info {
	return &core.Info{
		Name: i.GetName(), PluginVersion: i.GetPluginVersion(), Language: i.GetLanguage(),
		FileExtension: i.GetFileExtension(), RuntimeVersion: i.GetRuntimeVersion(),
		Capabilities: i.GetCapabilities(), Available: i.GetAvailable(),
		UnavailableReason: i.GetUnavailableReason(), Backend: i.GetBackend(),
		IsolationLevels: i.GetIsolationLevels(), SessionIsolationLevels: i.GetSessionIsolationLevels(),
	}
}

// QueryProto converts a cell's query for the wire; id is the call's, which
// its reply names.
func QueryProto(id uint64, q core.Query) *Callback {
	return &Callback{CallId: id, Kind: q.Kind, Prompts: q.Prompts, Contexts: q.Contexts, HasContext: q.HasContext, Model: q.Model}
}

// QueryFromProto converts the wire's query.
func QueryFromProto(c *Callback) core.Query {
	return core.Query{Kind: c.GetKind(), Prompts: c.GetPrompts(), Contexts: c.GetContexts(), HasContext: c.GetHasContext(), Model: c.GetModel()}
}
