package main

// Environment variables naming the secret shared with the proxy in front
// (server.Config.EdgeSecret, shim.Config.EdgeSecret).
const (
	EnvEdgeSecret = "CADUCEUS_EDGE_SECRET"
	// EnvHermaEdgeSecret is seed 003's name for EnvEdgeSecret, read when
	// ours is unset.
	EnvHermaEdgeSecret = "HERMA_EDGE_SECRET"
)

// edgeSecret is the edge secret of the environment: CADUCEUS_EDGE_SECRET,
// or HERMA_EDGE_SECRET when the first is unset or empty.
func (a *app) edgeSecret() string {
	if v := a.getenv(EnvEdgeSecret); v != "" {
		return v
	}
	return a.getenv(EnvHermaEdgeSecret)
}
