// Package buildinfo is what a writ binary knows of its build: the module
// version, the commit and its time, the build time and the Go toolchain, as
// `writ version` prints them and writ's start line logs them.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is what the binary knows of its build.
type Info struct {
	Version, Commit, CommitTime, BuildTime, Go string
	// Modified: the build had uncommitted changes.
	Modified bool
}

// Read is the binary's build info: the module version and the commit from
// the binary's own build info, unless version (set at build time with
// -ldflags -X) says otherwise; buildTime as set at build time, or "".
func Read(version, buildTime string) Info {
	b := Info{Version: "(devel)", BuildTime: buildTime, Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.time":
				b.CommitTime = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
		if b.Commit == "" {
			// go install module@version records no vcs settings; its
			// pseudo-version ends with the commit.
			if i := strings.LastIndexByte(strings.TrimSuffix(b.Version, "+incompatible"), '-'); i > 0 && strings.Count(b.Version, "-") >= 2 {
				b.Commit = strings.TrimSuffix(b.Version[i+1:], "+incompatible")
			}
		}
	}
	if version != "" {
		b.Version = version
	}
	return b
}

// Line is the one-line version for logs: the version and the short commit.
func (b Info) Line() string {
	s := b.Version
	if b.Commit != "" {
		s += " " + short(b.Commit)
		if b.Modified {
			s += "+modified"
		}
	}
	return s
}

// Text is what `writ version` prints.
func (b Info) Text() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "writ %s\n", b.Version)
	commit := b.Commit
	if commit == "" {
		commit = "unknown (built outside a git checkout)"
	} else if b.Modified {
		commit += " (with uncommitted changes)"
	}
	fmt.Fprintf(&sb, "commit:      %s\n", commit)
	if b.CommitTime != "" {
		fmt.Fprintf(&sb, "commit time: %s\n", b.CommitTime)
	}
	bt := b.BuildTime
	if bt == "" {
		bt = "unknown (make build and make install record it)"
	}
	fmt.Fprintf(&sb, "built:       %s\n", bt)
	fmt.Fprintf(&sb, "go:          %s\n", b.Go)
	return sb.String()
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
