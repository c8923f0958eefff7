package verbs

/*
#cgo LDFLAGS: -libverbs
#include <infiniband/verbs.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// ErrClosed is returned when an object, or one of its parents, was closed.
var ErrClosed = errors.New("verbs object is closed")

// ErrNoDevice is returned by Open for an unknown device name. It is
// rdmasys.ErrNoDevice itself, so one errors.Is matches the sysfs readers'
// "not there" and libibverbs' alike.
var ErrNoDevice = rdmasys.ErrNoDevice

// ErrNoRDMA: the kernel has no RDMA at all (ibv_get_device_list fails with
// ENOSYS: no RDMA modules loaded). Every command that lists devices tells
// it with errors.Is, and exits as for a node it could not measure.
var ErrNoRDMA = errors.New("no RDMA in this kernel")

// noRDMAError is ErrNoRDMA with the call that told it; it unwraps to the
// VerbError, so errors.Is(err, syscall.ENOSYS) holds too.
// From Open it is also ErrNoDevice: the device asked for is not there.
type noRDMAError struct {
	err      *VerbError
	noDevice bool
}

func (e *noRDMAError) Error() string {
	return fmt.Sprintf("%v (%s: errno %d): load the RDMA modules (rdma_rxe/mlx5_ib) or run on the rxe target (docs/rxe.md)",
		ErrNoRDMA, e.err.Verb, int(e.err.Errno))
}

func (e *noRDMAError) Unwrap() error { return e.err }
func (e *noRDMAError) Is(target error) bool {
	return target == ErrNoRDMA || e.noDevice && target == ErrNoDevice
}

// listErr is ibv_get_device_list's failure: ErrNoRDMA for ENOSYS.
func listErr(errno error) error {
	err := verbErr("ibv_get_device_list", "", errno)
	if ve := err.(*VerbError); ve.Errno == syscall.ENOSYS {
		return &noRDMAError{err: ve}
	}
	return err
}

// VerbError is a failed verb call: which verb, on what, and the errno it left.
type VerbError struct {
	Verb  string // "ibv_reg_mr", "ibv_modify_qp(RTR)", ...
	What  string // the object acted on, e.g. "QP 17", may be empty
	Errno syscall.Errno
}

func (e *VerbError) Error() string {
	if e.What != "" {
		return fmt.Sprintf("%s %s: %v (errno %d)", e.Verb, e.What, e.Errno, int(e.Errno))
	}
	return fmt.Sprintf("%s: %v (errno %d)", e.Verb, e.Errno, int(e.Errno))
}

func (e *VerbError) Unwrap() error { return e.Errno }

// verbErr builds a VerbError from an errno-style return value or errno.
func verbErr(verb, what string, errno error) error {
	var en syscall.Errno
	if !errors.As(errno, &en) || en == 0 {
		en = syscall.EIO // a verb failed without setting errno
	}
	return &VerbError{Verb: verb, What: what, Errno: en}
}

// rcErr turns a verb's returned errno (0 for success) into an error.
func rcErr(verb, what string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	en := syscall.Errno(rc)
	if rc < 0 {
		en = syscall.Errno(-rc)
	}
	return &VerbError{Verb: verb, What: what, Errno: en}
}

// WCStatus is a work completion status (enum ibv_wc_status). It is itself an
// error, so errors.Is(err, verbs.WCRemoteAccessErr) matches a CompletionError
// with that status.
type WCStatus int

const (
	WCSuccess         WCStatus = C.IBV_WC_SUCCESS
	WCLocLenErr       WCStatus = C.IBV_WC_LOC_LEN_ERR
	WCLocQPOpErr      WCStatus = C.IBV_WC_LOC_QP_OP_ERR
	WCLocProtErr      WCStatus = C.IBV_WC_LOC_PROT_ERR
	WCWRFlushErr      WCStatus = C.IBV_WC_WR_FLUSH_ERR
	WCRemInvReqErr    WCStatus = C.IBV_WC_REM_INV_REQ_ERR
	WCRemoteAccessErr WCStatus = C.IBV_WC_REM_ACCESS_ERR
	WCRemOpErr        WCStatus = C.IBV_WC_REM_OP_ERR
	WCRetryExcErr     WCStatus = C.IBV_WC_RETRY_EXC_ERR
	WCRNRRetryExcErr  WCStatus = C.IBV_WC_RNR_RETRY_EXC_ERR
	WCRemAbortErr     WCStatus = C.IBV_WC_REM_ABORT_ERR
	WCGeneralErr      WCStatus = C.IBV_WC_GENERAL_ERR
)

// String is libibverbs' own text for the status (ibv_wc_status_str).
func (s WCStatus) String() string {
	return C.GoString(C.ibv_wc_status_str(C.enum_ibv_wc_status(s)))
}

func (s WCStatus) Error() string { return s.String() }

// CompletionError is a work completion that did not succeed.
type CompletionError struct {
	Status    WCStatus
	VendorErr uint32
	WRID      uint64
	QPN       uint32
	Opcode    string // what was posted, when known ("RDMA_WRITE", ...)
}

func (e *CompletionError) Error() string {
	op := ""
	if e.Opcode != "" {
		op = e.Opcode + " "
	}
	return fmt.Sprintf("%scompletion on QP %d (wr_id %d): %s (status %d, vendor_err 0x%x)",
		op, e.QPN, e.WRID, e.Status, int(e.Status), e.VendorErr)
}

// Is matches a WCStatus target against the completion's status.
func (e *CompletionError) Is(target error) bool {
	s, ok := target.(WCStatus)
	return ok && s == e.Status
}
