package gateway

// SpendRow is one key's spend on one model identity.
type SpendRow struct {
	KeyID    string `json:"key_id"`
	Model    string `json:"model"`
	Attempts int64  `json:"attempts"`
	// Reserved is the sum of every attempt's reservation; Settled the sum of
	// settlements; Estimated the part of Settled the gateway estimated
	// (streams cut short before their usage came); Open what is reserved
	// by attempts still in flight — all in microdollars.
	Reserved  int64 `json:"reserved_microdollars"`
	Settled   int64 `json:"settled_microdollars"`
	Estimated int64 `json:"estimated_microdollars"`
	Open      int64 `json:"open_microdollars"`
}
