import Foundation
import TestSupport
import XCTest

/// FUSE over io_uring: where the kernel offers it, the mount serves through one ring per CPU; ordinary
/// tools work, a signal still unmounts and locks, and `--no-io-uring` keeps to /dev/fuse.
final class IoUringTests: MountTestCase {
    var previous: String?

    override func setUpWithError() throws {
        try super.setUpWithError()
        previous = try KernelRings.enable()
    }

    override func tearDown() {
        super.tearDown()  // unmounts first: the parameter only matters when a mount starts
        if let previous { KernelRings.restore(previous) }
    }

    var workload: String {
        """
        head -c 5000000 /dev/urandom > '\(mv.root)/big'
        cp '\(mv.root)/big' big
        cmp big '\(mv.root)/big'
        dd if=/dev/urandom of=big bs=4096 seek=300 count=3 conv=notrunc status=none
        if cmp -s big '\(mv.root)/big'; then echo "the overwrite did not land"; exit 1; fi
        dd if=big of=/dev/null bs=1M status=none
        mkdir -p tree/a tree/b
        for i in $(seq 200); do echo "file $i" > tree/a/$i || exit 1; done
        tar -cf t.tar tree
        mkdir copy
        tar -C copy -xf t.tar
        diff -r tree copy/tree
        mv copy/tree/a copy/tree/c
        ls -lR copy > /dev/null
        rm -rf copy t.tar
        python3 -c "import os; os.setxattr('big', 'user.tag', b'ring'); assert os.getxattr('big', 'user.tag') == b'ring'"
        sha256sum big > big.sum
        """
    }

    func testMountServesThroughTheRingsAndASignalStillLocks() throws {
        try mv.mount()
        try mv.shell(workload)
        let activity = try mv.ringActivity()
        let cpus = sysconf(Int32(_SC_NPROCESSORS_CONF))
        XCTAssertEqual(activity.workers, 4 * cpus, "four pinned workers per CPU queue")
        XCTAssertGreaterThan(activity.submissions, 2 * activity.workers + 200, "requests served through the rings")

        // SIGTERM: the device loop ends, the unmount stops the rings, the workers are joined, and only
        // then is the vault persisted and locked.
        let daemon = try mv.mountProcess()
        kill(daemon, SIGTERM)
        XCTAssertTrue(
            waitUntil(seconds: 10) { !self.mv.isMounted && kill(daemon, 0) != 0 },
            "SIGTERM unmounts and the process ends")
        try mv.verify()

        // The same vault through /dev/fuse only: everything the rings wrote is there.
        try mv.mount(["--no-io-uring"])
        let device = try mv.ringActivity()
        XCTAssertEqual(device.workers, 0, "no io_uring workers with --no-io-uring")
        XCTAssertEqual(device.submissions, 0, "no rings with --no-io-uring")
        try mv.shell(
            """
            sha256sum -c big.sum > /dev/null
            [ "$(cat tree/a/200)" = 'file 200' ]
            [ ! -e copy ]
            """)
        try mv.unmount()
        try mv.verify()

        // The idle timeout ends a ring-served mount too.
        try mv.mount(["--idle", "2s"])
        try mv.shell("cat big.sum > /dev/null")
        XCTAssertEqual(try mv.ringActivity().workers, 4 * cpus)
        XCTAssertTrue(waitUntil(seconds: 15) { !self.mv.isMounted }, "idle timeout unmounts")
        XCTAssertTrue(waitUntil(seconds: 10) { self.mv.findMountProcess() == nil }, "the mount process ends")
        try mv.verify()
    }

    /// A program reading one small block at a time is answered beside it: the worker commits the reply
    /// as SCHED_IDLE, so the reader is woken on the worker's CPU and takes it over at once (each such
    /// read shows as the worker being switched out while runnable). The data read is right, and every
    /// worker is back at SCHED_OTHER afterwards.
    func testSmallReadsAreAnsweredBesideTheReaderAndTheWorkersKeepTheirPolicy() throws {
        try mv.mount()
        try mv.shell("head -c 16000000 /dev/urandom > '\(mv.root)/reference' && cp '\(mv.root)/reference' data")
        try mv.unmount()
        try mv.mount()  // a fresh mount: nothing of `data` is in the kernel's cache
        let before = try mv.ringWorkerScheduling()
        let reads = 3000
        // The rings steer replies only while nothing else is runnable (the fourth field of /proc/loadavg);
        // other work on the machine turns steering off, and the count below then means nothing.
        let busy = Shared((samples: 0, quiet: 0, done: false))
        Thread {
            while !busy.withLock({ $0.done }) {
                let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
                let runnable =
                    text.split(separator: " ").dropFirst(3).first?.split(separator: "/").first.flatMap { Int($0) } ?? 99
                busy.withLock {
                    $0.samples += 1
                    if runnable <= 2 { $0.quiet += 1 }
                }
                usleep(5_000)
            }
        }.start()
        defer { busy.withLock { $0.done = true } }
        try mv.shell(
            """
            python3 - <<'EOF'
            import os, random
            fd, ref = os.open('data', os.O_RDONLY), os.open('\(mv.root)/reference', os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead: one 4 KiB request per read
            blocks = os.fstat(fd).st_size // 4096
            for _ in range(\(reads)):
                offset = random.randrange(blocks) * 4096
                assert os.pread(fd, 4096, offset) == os.pread(ref, 4096, offset), offset
            EOF
            """)
        let after = try mv.ringWorkerScheduling()
        XCTAssertEqual(after.policies.count, 4 * sysconf(Int32(_SC_NPROCESSORS_CONF)))
        XCTAssertEqual(Set(after.policies), [0], "every worker back at SCHED_OTHER")
        // Without steering the workers sleep between requests and are almost never switched out.
        let (samples, quiet, _) = busy.withLock {
            $0.done = true
            return $0
        }
        if quiet * 10 >= samples * 8 {
            XCTAssertGreaterThan(after.preemptions - before.preemptions, reads / 10, "readers took the workers' CPUs")
        } else {
            print("small reads: the machine was busy in \(samples - quiet) of \(samples) samples; steering not checked")
        }
    }

    /// SIGKILL cannot be caught: the kernel tears the rings down with the process, the mount is left
    /// disconnected and can be unmounted, and the vault opens again with what was fsynced.
    func testSIGKILLWhileServingLeavesAnUnmountableMountAndAVault() throws {
        try mv.mount()
        try mv.shell("echo kept > kept && sync kept")
        let writer = try mv.spawn(
            "/bin/bash",
            ["-c", "cd '\(mv.mountpoint)' && for i in $(seq 2000); do head -c 20000 /dev/urandom > f$i; done"])
        usleep(300_000)
        let daemon = try mv.mountProcess()
        XCTAssertEqual(try mv.ringActivity().workers, 4 * sysconf(Int32(_SC_NPROCESSORS_CONF)))
        kill(daemon, SIGKILL)
        XCTAssertTrue(waitUntil(seconds: 10) { kill(daemon, 0) != 0 }, "the killed process is gone")
        _ = ProcessRunner.wait(writer)
        _ = try mv.execute("/bin/fusermount3", ["-u", mv.mountpoint])
        XCTAssertTrue(waitUntil(seconds: 10) { !self.mv.isMounted }, "the disconnected mount unmounts")
        try mv.mount()
        XCTAssertEqual(try mv.shell("cat kept").stdout, "kept\n")
        try mv.unmount()
        try mv.verify()
    }
}
