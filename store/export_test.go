package store_test

import "github.com/caduceus-dev/caduceus/store"

type storeTx = store.Tx

var appendAudit = store.AppendAudit
