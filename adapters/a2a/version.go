package a2a

import (
	"fmt"
	"strings"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// ProtocolName is the protocol name that requests carry in task.Protocol.
const ProtocolName = "a2a"

// The supported protocol versions.
const (
	V03 = "0.3"
	V10 = "1.0"
)

// Header names of the protocol.
const (
	VersionHeader          = "A2A-Version"
	ExtensionsHeader       = "A2A-Extensions"
	LegacyExtensionsHeader = "X-A2A-Extensions"
)

// requestedVersion reads the A2A-Version header (or query parameter). Absent or
// empty means 0.3, as the specification says.
func requestedVersion(in wire.Inbound) (string, *task.Fault) {
	v := strings.TrimSpace(in.Header.Get(VersionHeader))
	if v == "" && in.Query != nil {
		v = strings.TrimSpace(in.Query.Get(VersionHeader))
	}
	switch v {
	case "", V03:
		return V03, nil
	case V10:
		return V10, nil
	}
	return V03, task.NewFault(task.KindVersionNotSupported,
		fmt.Sprintf("A2A version %q is not supported (supported: 0.3, 1.0)", v))
}

func mismatch(header, style, what string) *task.Fault {
	hv := header
	if hv == V03 {
		hv = "0.3 (no A2A-Version header)"
	}
	return task.NewFault(task.KindVersionNotSupported,
		fmt.Sprintf("%s is A2A %s style but the request declares version %s", what, style, hv))
}

// extensions collects the activated extensions from both header spellings.
func extensions(in wire.Inbound) []string {
	var out []string
	for _, h := range []string{ExtensionsHeader, LegacyExtensionsHeader} {
		for _, v := range in.Header.Values(h) {
			for e := range strings.SplitSeq(v, ",") {
				if e = strings.TrimSpace(e); e != "" {
					out = append(out, e)
				}
			}
		}
	}
	return out
}
