package shim

import (
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
)

func TestLens(t *testing.T) {
	g := &Governor{Cohorts: map[contract.TenantSlot][]string{"slot-1": {"core", "beta"}}}
	v := func(vis, cohort string, harness ...string) *Governance {
		return &Governance{Status: govVerified, VisibilityScope: vis, Cohort: cohort, Harness: harness}
	}
	for _, tc := range []struct {
		name    string
		gov     *Governance
		tenant  contract.TenantSlot
		harness string
		want    string // "" = admitted
	}{
		{"no governance", nil, "slot-1", "h", ReasonNoGovernance},
		{"quarantined", &Governance{Status: GovQuarantined}, "slot-1", "h", ReasonQuarantined},
		{"unverified", &Governance{Status: govUnverified}, "slot-1", "h", ReasonUnverified},
		{"no status", &Governance{}, "slot-1", "h", ReasonUnverified},
		{"public", v("public", ""), "slot-9", "h", ""},
		{"empty visibility is public", v("", ""), "slot-9", "h", ""},
		{"team in cohort", v("team", "beta"), "slot-1", "h", ""},
		{"team not in cohort", v("team", "beta"), "slot-2", "h", ReasonVisibility},
		{"team without cohort", v("team", ""), "slot-1", "h", ReasonVisibility},
		{"tenant scope match", v("tenant:slot-2", ""), "slot-2", "h", ""},
		{"tenant scope other", v("tenant:slot-2", ""), "slot-1", "h", ReasonVisibility},
		{"unknown visibility", v("private", ""), "slot-1", "h", reasonVisibilityBad},
		{"cohort star", v("public", "*"), "slot-9", "h", ""},
		{"cohort mismatch", v("public", "research"), "slot-1", "h", ReasonCohort},
		{"harness listed", v("public", "", "cursor", "claude-code"), "slot-1", "claude-code", ""},
		{"harness not listed", v("public", "", "cursor"), "slot-1", "claude-code", ReasonHarness},
		{"harness star", v("public", "", "*"), "slot-1", "anything", ""},
	} {
		ok, why := g.Lens(tc.gov, tc.tenant, tc.harness)
		if ok != (tc.want == "") || why != tc.want {
			t.Errorf("%s: Lens = %v %q, want %q", tc.name, ok, why, tc.want)
		}
	}
	// A nil Governor puts no tenant in a cohort.
	if ok, why := (*Governor)(nil).Lens(v("team", "core"), "slot-1", "h"); ok || why != ReasonVisibility {
		t.Errorf("nil governor admits a team record: %v %q", ok, why)
	}
}

func TestAdmit(t *testing.T) {
	g := &Governor{}
	routed := contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1"}, Scopes: []contract.Scope{contract.ScopeRoute}, Harness: "h"}
	conf := contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1"}, Scopes: []contract.Scope{contract.ScopeConfigure}, Harness: "h"}
	pub := &Governance{Status: govVerified, VisibilityScope: "public"}
	for _, tc := range []struct {
		name   string
		p      Provision
		caller contract.Caller
		want   string
	}{
		{"ungoverned", Provision{ID: "a"}, conf, ""},
		{"ungoverned builtin", Provision{ID: "a", SystemBuiltin: true}, conf, ""},
		{"governed", Provision{ID: "a", FabricGovernance: pub}, conf, ""},
		{"starter, routed", Provision{ID: "a", SystemBuiltin: true, FabricGovernance: pub}, routed, ""},
		{"starter, not routed", Provision{ID: "a", SystemBuiltin: true, FabricGovernance: pub}, conf, reasonNotRouted},
		{"starter, quarantined", Provision{ID: "a", SystemBuiltin: true, FabricGovernance: &Governance{Status: GovQuarantined}}, routed, ReasonQuarantined},
	} {
		ok, why := g.Admit(t.Context(), tc.caller, tc.p)
		if ok != (tc.want == "") || why != tc.want {
			t.Errorf("%s: Admit = %v %q, want %q", tc.name, ok, why, tc.want)
		}
	}
}
