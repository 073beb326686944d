package sandbox

import (
	"strings"
	"testing"
)

// TestAgentRequestSummary: how a policy with the agent's request fields (PrivatePIDs, HostNetwork,
// ConnectPorts) describes itself on each mechanism.
func TestAgentRequestSummary(t *testing.T) {
	for _, c := range []struct {
		name               string
		p                  Policy
		network, processes string
		warning            string
	}{
		{"namespaces, proxy port", Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: 7, pids: true, wantPIDs: true, hostNet: true, ports: []uint16{4242}},
			"host, TCP connect only to port 4242 (Landlock)", "private", ""},
		{"namespaces, no port", Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: 7, hostNet: true},
			"host, TCP connect denied (Landlock)", "", ""},
		{"old Landlock", Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: 3, hostNet: true, ports: []uint16{1}},
			"host, TCP connect unrestricted (Landlock ABI < 4)", "", ""},
		{"PID namespace unavailable", Policy{mode: ModeAuto, mech: MechanismNamespaces, abi: 7, wantPIDs: true, hostNet: true, reason: "a private PID namespace does not work here (x)"},
			"host, TCP connect denied (Landlock)", "", "commands can see their ancestors' processes"},
		{"Landlock alone", Policy{mode: ModeAuto, mech: MechanismLandlock, abi: 7, wantPIDs: true, hostNet: true, ports: []uint16{80}, reason: "no user namespaces"},
			"host, TCP connect only to port 80 (Landlock)", "", "commands can see their ancestors' processes"},
		{"off", Policy{mode: ModeOff, mech: MechanismNone, wantPIDs: true, hostNet: true}, "unrestricted", "", "--sandbox off"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.p.Summary()
			if s.Network != c.network || s.Processes != c.processes {
				t.Errorf("network %q, processes %q; want %q, %q", s.Network, s.Processes, c.network, c.processes)
			}
			if w := c.p.Warning(); (c.warning == "") != (w == "") || !strings.Contains(w, c.warning) {
				t.Errorf("warning %q, want one with %q", w, c.warning)
			}
		})
	}
}
