package killtree

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, which x/sys
// v0.50.0 does not define.
type jobAccounting struct {
	TotalUserTime             int64
	TotalKernelTime           int64
	ThisPeriodTotalUserTime   int64
	ThisPeriodTotalKernelTime int64
	TotalPageFaultCount       uint32
	TotalProcesses            uint32
	ActiveProcesses           uint32
	TotalTerminatedProcesses  uint32
}

// jobPidList is JOBOBJECT_BASIC_PROCESS_ID_LIST with room for 4096 IDs.
type jobPidList struct {
	Assigned uint32
	InList   uint32
	IDs      [4096]uintptr
}

// jobObjectBasicProcessIDList is JobObjectBasicProcessIdList.
const jobObjectBasicProcessIDList = 3

var procNtResumeProcess = windows.NewLazySystemDLL("ntdll.dll").NewProc("NtResumeProcess")

// winJob is a job object with kill-on-close, an active-process limit and an
// optional memory limit, and no breakaway: CREATE_BREAKAWAY_FROM_JOB fails
// inside it.
type winJob struct {
	h windows.Handle
}

func newWinJob(cfg Config) (*winJob, error) {
	h, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, fmt.Errorf("killtree: CreateJobObject: %w", err)
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if cfg.PidsMax > 0 {
		info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_ACTIVE_PROCESS
		info.BasicLimitInformation.ActiveProcessLimit = uint32(cfg.PidsMax)
	}
	if cfg.MemoryMax > 0 {
		info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_JOB_MEMORY
		info.JobMemoryLimit = uintptr(cfg.MemoryMax)
	}
	if _, err := windows.SetInformationJobObject(h, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(h)
		return nil, fmt.Errorf("killtree: SetInformationJobObject: %w", err)
	}
	return &winJob{h: h}, nil
}

func (j *winJob) assign(pid int) error {
	p, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		return err
	}
	defer windows.CloseHandle(p)
	return windows.AssignProcessToJobObject(j.h, p)
}

// resume uses NtResumeProcess: os/exec closes the primary thread's handle
// (syscall/exec_windows.go), so ResumeThread has nothing to work on.
func (j *winJob) resume(pid int) error {
	p, err := windows.OpenProcess(windows.PROCESS_SUSPEND_RESUME, false, uint32(pid))
	if err != nil {
		return err
	}
	defer windows.CloseHandle(p)
	if err := procNtResumeProcess.Find(); err != nil {
		return err
	}
	if st, _, _ := procNtResumeProcess.Call(uintptr(p)); st != 0 {
		return fmt.Errorf("NtResumeProcess: NTSTATUS %#x", st)
	}
	return nil
}

func (j *winJob) pids() ([]int, error) {
	var l jobPidList
	if err := windows.QueryInformationJobObject(j.h, jobObjectBasicProcessIDList,
		uintptr(unsafe.Pointer(&l)), uint32(unsafe.Sizeof(l)), nil); err != nil && err != windows.ERROR_MORE_DATA {
		return nil, err
	}
	out := make([]int, 0, l.InList)
	for _, id := range l.IDs[:min(int(l.InList), len(l.IDs))] {
		out = append(out, int(id))
	}
	return out, nil
}

func (j *winJob) terminate() error { return windows.TerminateJobObject(j.h, 1) }

func (j *winJob) active() (int, error) {
	var a jobAccounting
	if err := windows.QueryInformationJobObject(j.h, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&a)), uint32(unsafe.Sizeof(a)), nil); err != nil {
		return 0, err
	}
	return int(a.ActiveProcesses), nil
}

func (j *winJob) close() error {
	if j.h == 0 {
		return nil
	}
	err := windows.CloseHandle(j.h)
	j.h = 0
	return err
}

// usage reads the job's accounting: the CPU times of every process that
// ran in it (TotalUserTime, TotalKernelTime, 100 ns units) and the job's
// peak committed memory (PeakJobMemoryUsed).
func (j *winJob) usage() (Usage, error) {
	var a jobAccounting
	if err := windows.QueryInformationJobObject(j.h, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&a)), uint32(unsafe.Sizeof(a)), nil); err != nil {
		return Usage{}, err
	}
	var ext windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	if err := windows.QueryInformationJobObject(j.h, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&ext)), uint32(unsafe.Sizeof(ext)), nil); err != nil {
		return Usage{}, err
	}
	return Usage{CPUUser: time.Duration(a.TotalUserTime) * 100, CPUSystem: time.Duration(a.TotalKernelTime) * 100,
		PeakMemory: int64(ext.PeakJobMemoryUsed), CPUFromCgroup: true, MemoryFromCgroup: true}, nil
}
