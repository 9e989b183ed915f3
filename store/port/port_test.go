package port_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/caduceus-dev/caduceus/store/port"
)

// Row reads what each driver hands back for INTEGER and TEXT columns: D1
// numbers as float64, SQLite and Postgres integers as int64, texts as
// string or bytes.
func TestRow(t *testing.T) {
	r := port.Row{float64(1<<52 + 1), int64(7), "12", []byte("x"), nil, true, 2.5}
	if r.Int(0) != 1<<52+1 || r.Int(1) != 7 || r.Int(2) != 12 || r.Int(4) != 0 || r.Int(5) != 1 {
		t.Fatalf("Int: %d %d %d %d %d", r.Int(0), r.Int(1), r.Int(2), r.Int(4), r.Int(5))
	}
	if r.Str(3) != "x" || r.Str(4) != "" || r.Str(6) != "2.5" || r.Str(0) != "4503599627370497" || !r.Null(4) || r.Null(3) {
		t.Fatalf("Str: %q %q %q %q", r.Str(3), r.Str(4), r.Str(6), r.Str(0))
	}
}

// A unique violation keeps the driver's text and error, and is found as
// port.ErrUnique also when wrapped again; another error is not.
func TestUnique(t *testing.T) {
	driver := errors.New("UNIQUE constraint failed: audit_records.tenant, audit_records.seq")
	err := fmt.Errorf("append: %w", port.UniqueError(driver))
	if !port.Unique(err) || !errors.Is(err, driver) || err.Error() != "append: "+driver.Error() {
		t.Fatalf("%v", err)
	}
	if port.Unique(driver) || port.Unique(nil) {
		t.Fatal("an unmarked error is not port.ErrUnique")
	}
	if !port.SQLiteUnique(driver.Error()) || port.SQLiteUnique("no such table: keys") {
		t.Fatal("SQLiteUnique")
	}
}
