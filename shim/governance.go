package shim

import (
	"context"
	"slices"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
)

// Governance statuses (fabric_governance.status).
const (
	govVerified    = "verified"
	govUnverified  = "unverified"
	GovQuarantined = "quarantined"
)

// Visibility scopes (fabric_governance.visibility_scope).
const (
	visibilityPublic = "public"  // any tenant ("" means the same)
	visibilityTeam   = "team"    // tenants in the record's cohort (a cohort is then required)
	visibilityTenant = "tenant:" // "tenant:slot-N": that tenant only
)

// Reasons the lens refuses a record; each is a stable code.
const (
	ReasonNoGovernance  = "no_governance"
	ReasonQuarantined   = "quarantined"
	ReasonUnverified    = "unverified"
	ReasonVisibility    = "visibility_mismatch"
	reasonVisibilityBad = "visibility_unknown"
	ReasonCohort        = "cohort_mismatch"
	ReasonHarness       = "harness_mismatch"
	reasonNotRouted     = "not_routed"
)

// Governor is the Layer-1 fabric_governance lens (seed 003, H12, H19).
//
// A tenant's cohorts are configuration: Cohorts maps a tenant slot to the
// cohort names it belongs to (the lead's YAML: shim.cohorts: {slot-3:
// [core, beta]}). A tenant not listed belongs to no cohort, so it sees only
// records whose cohort is empty or "*".
type Governor struct {
	Cohorts map[contract.TenantSlot][]string
}

// Lens decides whether a record with governance g may be used by tenant
// through harness, and if not, why (one of the Reason codes):
//   - g must be present and its status "verified" ("quarantined" and any
//     other status are refused, with their own reasons);
//   - visibility_scope "" or "public" admits every tenant, "team" admits
//     the tenants of the record's cohort, "tenant:slot-N" admits slot-N
//     only, anything else is refused;
//   - cohort "" or "*" admits every tenant, else the tenant must belong to it;
//   - harness empty or containing "*" admits every harness, else the
//     harness must be listed.
func (g *Governor) Lens(gov *Governance, tenant contract.TenantSlot, harness string) (bool, string) {
	if gov == nil {
		return false, ReasonNoGovernance
	}
	switch gov.Status {
	case govVerified:
	case GovQuarantined:
		return false, ReasonQuarantined
	default:
		return false, ReasonUnverified
	}
	inCohort := func(c string) bool {
		return c != "" && g != nil && slices.Contains(g.Cohorts[tenant], c)
	}
	switch v := gov.VisibilityScope; {
	case v == "" || v == visibilityPublic:
	case v == visibilityTeam:
		if !inCohort(gov.Cohort) {
			return false, ReasonVisibility
		}
	case strings.HasPrefix(v, visibilityTenant):
		if contract.TenantSlot(strings.TrimPrefix(v, visibilityTenant)) != tenant {
			return false, ReasonVisibility
		}
	default:
		return false, reasonVisibilityBad
	}
	if c := gov.Cohort; c != "" && c != "*" && !inCohort(c) {
		return false, ReasonCohort
	}
	if len(gov.Harness) > 0 && !slices.Contains(gov.Harness, "*") && !slices.Contains(gov.Harness, harness) {
		return false, ReasonHarness
	}
	return true, ""
}

// Admit is the shim.Config.Admit hook. A provision carrying
// fabric_governance fires only while the lens admits the caller's tenant
// and harness; a system_builtin provision carrying it (a synced starter)
// fires only for routed callers (route scope) as well. Provisions without
// fabric_governance are not this lens's business and are admitted.
func (g *Governor) Admit(_ context.Context, caller contract.Caller, p Provision) (bool, string) {
	if p.FabricGovernance == nil {
		return true, ""
	}
	if p.SystemBuiltin && !caller.Has(contract.ScopeRoute) {
		return false, reasonNotRouted
	}
	return g.Lens(p.FabricGovernance, caller.Identity.TenantSlot, caller.Harness)
}
