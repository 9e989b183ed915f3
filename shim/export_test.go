package shim

// Provisions is the Service's cached read of a tenant's provisions, for
// the tests.
var Provisions = (*Service).provisions
