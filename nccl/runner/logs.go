package runner

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/ncclog"
)

// logSetup is how this run captures NCCL's INFO log for analysis.
type logSetup struct {
	path    string // file NCCL writes to; "" if we cannot read the log
	tmpDir  string // removed at the end
	skipped string // why there is no analysis
}

// setupLog must run before NCCL is loaded: NCCL reads these variables once.
// A user who set NCCL_DEBUG keeps full control of the log.
func setupLog(o *Options, env launch.Env) *logSetup {
	lg := &logSetup{}
	if o.NoAnalysis {
		lg.skipped = "--no-log-analysis"
		return lg
	}
	if os.Getenv("NCCL_DEBUG") != "" {
		if f := os.Getenv("NCCL_DEBUG_FILE"); f != "" && !strings.Contains(f, "%") && strings.EqualFold(os.Getenv("NCCL_DEBUG"), "INFO") {
			lg.path = f
			return lg
		}
		lg.skipped = "NCCL_DEBUG is set, so NCCL's log goes where you sent it; analyze it with: ncclbench analyze FILE"
		return lg
	}
	if o.NCCLLog != "" {
		lg.path = o.NCCLLog
		if env.Rank > 0 {
			lg.path = fmt.Sprintf("%s.%d", o.NCCLLog, env.Rank)
		}
		os.Remove(lg.path)
	} else {
		dir, err := os.MkdirTemp("", "ncclbench-")
		if err != nil {
			lg.skipped = "cannot create a temporary file for NCCL's log: " + err.Error()
			return lg
		}
		lg.tmpDir = dir
		lg.path = filepath.Join(dir, "nccl.log")
	}
	os.Setenv("NCCL_DEBUG", "INFO")
	sub := os.Getenv("NCCL_DEBUG_SUBSYS")
	switch {
	case sub == "":
		os.Setenv("NCCL_DEBUG_SUBSYS", "INIT,NET,ENV")
	case !strings.Contains(strings.ToUpper(sub), "NET") && !strings.Contains(strings.ToUpper(sub), "ALL"):
		os.Setenv("NCCL_DEBUG_SUBSYS", sub+",NET")
	}
	os.Setenv("NCCL_DEBUG_FILE", lg.path)
	return lg
}

func (lg *logSetup) analyze() *ncclog.Report {
	if lg.path == "" {
		return nil
	}
	f, err := os.Open(lg.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	rep, err := ncclog.Parse(f)
	if err != nil {
		return nil
	}
	return rep
}

// print writes the analysis under the table, each line a "#" comment so
// tools that read nccl-tests output skip it.
func (lg *logSetup) print(w io.Writer, rep *ncclog.Report, lib *nccl.Lib) {
	fmt.Fprintf(w, "#\n# NCCL %s from %s\n", nccl.VersionString(lib.Version), lib.NCCLPath)
	if lg.skipped != "" {
		fmt.Fprintf(w, "# NCCL log analysis skipped: %s\n", lg.skipped)
		return
	}
	if rep == nil {
		fmt.Fprintf(w, "# NCCL log analysis: no log found at %s\n", lg.path)
		return
	}
	where := "this process's NCCL log"
	if lg.tmpDir == "" {
		where += " " + lg.path
	}
	fmt.Fprintf(w, "# NCCL log analysis (%s):\n", where)
	var b strings.Builder
	rep.WriteText(&b)
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		fmt.Fprintf(w, "#   %s\n", line)
	}
}

func (lg *logSetup) cleanup() {
	if lg.tmpDir != "" {
		os.RemoveAll(lg.tmpDir)
	}
}
