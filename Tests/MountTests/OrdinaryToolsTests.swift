import Foundation
import XCTest

final class OrdinaryToolsTests: MountTestCase {
    func testToolsEditorsGitSQLiteAndNoPlaintextOnDisk() throws { try toolsEditorsGitSQLiteAndNoPlaintextOnDisk() }

    func testToolsEditorsGitSQLiteAndNoPlaintextOnDiskThroughIoUring() throws {
        try throughIoUring(toolsEditorsGitSQLiteAndNoPlaintextOnDisk)
    }

    func toolsEditorsGitSQLiteAndNoPlaintextOnDisk() throws {
        try mv.mount()
        // A source tree outside the vault to copy in.
        try mv.shell(
            """
            cd '\(mv.root)'; mkdir -p src/sub/deeper; echo 'top secret alpha' > src/a.txt; head -c 300000 /dev/urandom > src/sub/blob.bin
            echo 'nested bravo' > src/sub/deeper/b.txt; ln -s a.txt src/link; chmod 640 src/a.txt
            touch -d '2001-02-03 04:05:06' src/a.txt; tar -C src -cf src.tar .
            git init -q origin
            echo 'charlie in git' > origin/readme
            git -C origin add readme
            git -C origin -c user.name=t -c user.email=t@e commit -qm first
            """)
        let r = try mv.shell(
            """
            cp -a ../src cp-a
            diff -r ../src cp-a
            [ "$(stat -c %a cp-a/a.txt)" = 640 ]
            [ "$(stat -c %Y cp-a/a.txt)" = "$(stat -c %Y ../src/a.txt)" ]
            [ "$(readlink cp-a/link)" = a.txt ]
            rsync -a ../src/ rsynced/
            diff -r ../src rsynced
            mkdir untarred
            tar -C untarred -xf ../src.tar
            diff -r ../src untarred
            git clone -q ../origin cloned
            [ -z "$(git -C cloned status --porcelain)" ]
            echo change >> cloned/readme
            git -C cloned status --porcelain | grep -q 'M readme'
            git -C cloned -c user.name=t -c user.email=t@e commit -qam second
            git -C cloned fsck --no-progress >/dev/null 2>&1
            sqlite3 db.sqlite 'pragma journal_mode=wal; create table t(k integer primary key, v blob);'
            for i in $(seq 1 20); do sqlite3 db.sqlite "begin; insert into t(v) select randomblob(3000) from (select 1 union select 2 union select 3); commit;"; done
            sqlite3 db.sqlite 'update t set v = randomblob(100) where k % 3 = 0; delete from t where k % 5 = 0; vacuum;'
            [ "$(sqlite3 db.sqlite 'pragma integrity_check')" = ok ]
            sqlite3 db.sqlite 'select count(*) from t'
            # Editor-style save: write a temporary file, fsync it, rename over the original.
            echo 'version 1' > doc.txt
            python3 -c "import os; f=open('doc.txt.swp','w'); f.write('version 2 delta\\n'); f.flush(); os.fsync(f.fileno()); f.close(); os.rename('doc.txt.swp','doc.txt')"
            [ "$(cat doc.txt)" = 'version 2 delta' ]
            dd if=/dev/urandom of=sparse bs=4096 count=2 seek=300 conv=fsync status=none
            [ "$(stat -c %s sparse)" = $((302*4096)) ]
            cmp -n 4096 sparse /dev/zero
            python3 -c "import mmap; f=open('sparse','rb'); m=mmap.mmap(f.fileno(),0,prot=mmap.PROT_READ); assert m[:4096]==bytes(4096); assert len(m)==302*4096"
            echo one > app.log; echo two >> app.log; [ "$(cat app.log)" = "$(printf 'one\\ntwo')" ]
            ( set -o noclobber; ! echo x > app.log ) 2>/dev/null
            ln app.log hard.log
            [ "$(stat -c %h app.log)" = 2 ]
            rm app.log
            [ "$(cat hard.log | wc -l)" = 2 ]
            mkfifo fifo
            [ -p fifo ]
            python3 -c "import os; os.setxattr('hard.log','user.color',b'blue'); assert os.getxattr('hard.log','user.color')==b'blue'; assert 'user.color' in os.listxattr('hard.log')"
            truncate -s 10 hard.log
            [ "$(stat -c %s hard.log)" = 10 ]
            find . -type f | wc -l
            du -s . > /dev/null
            mkdir -p d1/d2
            mv d1 moved
            [ -d moved/d2 ]
            if rmdir moved 2>/dev/null; then exit 1; fi
            """)
        XCTAssertTrue(r.stdout.contains("48"), "sqlite row count: \(r.stdout)")
        try mv.unmount()
        try mv.verify()
        // Neither names nor contents reached the backing directory.
        let grep = try mv.execute(
            "/bin/grep",
            [
                "-r", "-l", "-a", "-e", "top secret alpha", "-e", "nested bravo", "-e", "charlie in git",
                "-e", "version 2 delta", "-e", "blob.bin", "-e", "readme", "-e", "db.sqlite", mv.vault,
            ])
        XCTAssertEqual(grep.status, 1, "plaintext found in the vault directory: \(grep.stdout)")
        // Remount: everything is still there.
        try mv.mount()
        try mv.shell(
            """
            diff -r ../src cp-a
            [ "$(cat doc.txt)" = 'version 2 delta' ]
            [ "$(sqlite3 db.sqlite 'pragma integrity_check')" = ok ]
            """)
        try mv.unmount()
    }

    func testErrnosMatchPOSIX() throws { try errnosMatchPOSIX() }

    func testErrnosMatchPOSIXThroughIoUring() throws { try throughIoUring(errnosMatchPOSIX) }

    func errnosMatchPOSIX() throws {
        try mv.mount()
        try mv.shell(
            """
            python3 - <<'PY'
            import errno, os
            def expect(code, f, *a):
                try:
                    f(*a)
                except OSError as e:
                    assert e.errno == code, (f.__name__, a, errno.errorcode.get(e.errno), errno.errorcode[code])
                    return
                raise AssertionError(("no error", f.__name__, a))
            os.mkdir('d'); open('d/f','w').write('x'); open('g','w').write('y')
            expect(errno.ENOENT, os.stat, 'missing')
            expect(errno.EEXIST, os.mkdir, 'd')
            expect(errno.ENOTEMPTY, os.rmdir, 'd')
            expect(errno.ENOTDIR, os.listdir, 'g')
            expect(errno.ENOTDIR, os.rmdir, 'g')
            expect(errno.EISDIR, os.unlink, 'd')
            expect(errno.EISDIR, open, 'd', 'w')
            expect(errno.ENAMETOOLONG, open, 'n' * 256, 'w')
            expect(errno.EEXIST, os.open, 'g', os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            expect(errno.ENOENT, os.rename, 'missing', 'x')
            expect(errno.ENODATA, os.getxattr, 'g', 'user.none')
            # Namespaces the vault does not keep say so (ls -l then stops asking). The kernel checks
            # ACL and capability values before they reach the mount, so those are well formed.
            import struct
            acl = struct.pack('<I', 2) + b''.join(struct.pack('<HHI', tag, 6, 0xFFFFFFFF) for tag in (1, 4, 0x20))
            capability = struct.pack('<IIIII', 0x02000000, 0, 0, 0, 0)
            for name, value in (('security.selinux', b'v'), ('security.capability', capability),
                                ('system.posix_acl_access', acl), ('trusted.x', b'v')):
                expect(errno.EOPNOTSUPP, os.getxattr, 'g', name)
                expect(errno.EOPNOTSUPP, os.setxattr, 'g', name, value)
                expect(errno.EOPNOTSUPP, os.removexattr, 'g', name)
            os.rename('g', 'd/f')   # replaces the target
            assert open('d/f').read() == 'y'
            fd = os.open('d/f', os.O_RDWR); os.unlink('d/f'); os.write(fd, b'still here'); os.lseek(fd, 0, 0)
            assert os.read(fd, 100) == b'still here'; os.close(fd)
            assert os.listdir('d') == []
            st = os.stat('d'); t0 = st.st_mtime_ns
            import time; time.sleep(0.01); open('d/new', 'w').close()
            assert os.stat('d').st_mtime_ns > t0, 'directory mtime must change'
            os.chmod('d/new', 0o4755); assert oct(os.stat('d/new').st_mode & 0o7777) == '0o4755'
            os.utime('d/new', ns=(1_000_000_000, 2_000_000_000)); assert os.stat('d/new').st_mtime_ns == 2_000_000_000
            os.truncate('d/new', 100000); assert os.stat('d/new').st_size == 100000 and open('d/new','rb').read() == bytes(100000)
            PY
            """)
        try mv.unmount()
        try mv.verify()
    }

    /// A streaming write reaches the mount as the kernel's write-back sends it — 1 MiB requests, many at
    /// once and out of order, each landing past the end before the ones it skips — and a write far past
    /// the end leaves a gap; both read back byte for byte, also after a remount and `verify`.
    func testStreamingAndSparseWritesRoundTripThroughTheKernelsWriteBack() throws {
        try streamingAndSparseWritesRoundTripThroughTheKernelsWriteBack()
    }

    func testStreamingAndSparseWritesRoundTripThroughTheKernelsWriteBackThroughIoUring() throws {
        try throughIoUring(streamingAndSparseWritesRoundTripThroughTheKernelsWriteBack)
    }

    func streamingAndSparseWritesRoundTripThroughTheKernelsWriteBack() throws {
        try mv.mount()
        let check = """
            cmp big ../big.src
            [ "$(stat -c %s holey)" = $((22 * 1048576)) ]
            cmp -n $((20 * 1048576)) holey /dev/zero
            cmp -i $((20 * 1048576)):0 -n $((2 * 1048576)) holey ../big.src
            """
        try mv.shell(
            """
            head -c $((48 * 1048576)) /dev/urandom > ../big.src
            dd if=../big.src of=big bs=1M status=none
            dd if=../big.src of=holey bs=1M count=2 seek=20 status=none
            \(check)
            """)
        try mv.unmount()
        try mv.verify()
        try mv.mount()
        try mv.shell(check)
        try mv.unmount()
    }

    /// The mount widens its own read-ahead window to 1 MiB once the kernel has taken the INIT reply, so
    /// a streaming read reaches it as several large requests at once, decrypted side by side; a file read
    /// cold that way, and from the middle, is byte for byte what was written.
    func testStreamingReadsGetTheMountsWiderReadAheadWindow() throws {
        try streamingReadsGetTheMountsWiderReadAheadWindow()
    }

    func testStreamingReadsGetTheMountsWiderReadAheadWindowThroughIoUring() throws {
        try throughIoUring(streamingReadsGetTheMountsWiderReadAheadWindow)
    }

    func streamingReadsGetTheMountsWiderReadAheadWindow() throws {
        try mv.mount()
        try mv.shell(
            """
            window=$(cat /sys/class/bdi/$(mountpoint -d "$PWD")/read_ahead_kb)
            [ "$window" = 1024 ] || { echo "read_ahead_kb $window"; exit 1; }
            head -c $((40 * 1048576 + 12345)) /dev/urandom > ../stream.src
            cp ../stream.src stream
            sync
            echo 3 > /proc/sys/vm/drop_caches
            cmp stream ../stream.src
            echo 3 > /proc/sys/vm/drop_caches
            cmp <(tail -c +$((17 * 1048576 + 4097)) stream) <(tail -c +$((17 * 1048576 + 4097)) ../stream.src)
            """)
        try mv.unmount()
    }

    /// Requests of 256 KiB and more are decrypted in two halves at once. Direct reads (which reach the
    /// mount at exactly the size asked) return what one read would: whole, ending in either half, past
    /// the end; and a damaged chunk in the second half fails the whole read with EIO.
    func testLargeReadsSplitInHalvesReadAsOneAndFailAsOne() throws {
        try largeReadsSplitInHalvesReadAsOneAndFailAsOne()
    }

    func testLargeReadsSplitInHalvesReadAsOneAndFailAsOneThroughIoUring() throws {
        try throughIoUring(largeReadsSplitInHalvesReadAsOneAndFailAsOne)
    }

    func largeReadsSplitInHalvesReadAsOneAndFailAsOne() throws {
        try mv.mount()
        try mv.shell(
            """
            head -c $((3 * 1048576 + 12345)) /dev/urandom > ../whole.src && cp ../whole.src whole
            head -c $((1048576 + 12345)) /dev/urandom > damaged
            """)
        let directRead = """
            import mmap, os
            def direct(name, offset, size):
                fd = os.open(name, os.O_RDONLY | os.O_DIRECT)
                buffer = mmap.mmap(-1, size)
                try: return bytes(buffer[:os.preadv(fd, [buffer], offset)])
                finally: os.close(fd)
            """
        try mv.shell(
            """
            python3 - <<'PY'
            \(directRead)
            plain = open('../whole.src', 'rb').read()
            M = 1 << 20
            for offset, size in [(0, M), (M, 512 * 1024), (2 * M + M // 2, M), (3 * M - 256 * 1024, M), (3 * M, M), (4 * M, M)]:
                got = direct('whole', offset, size)
                assert got == plain[offset:offset + size], (offset, size, len(got))
            PY
            """)
        try mv.unmount()
        // Damage a byte about four fifths into the smaller blob: a chunk in the second half of a 1 MiB read at 0.
        let damaged = try XCTUnwrap(mv.blobSizes().min { $0.size < $1.size })
        try mv.flipByte(ofBlob: damaged.name, at: UInt64(damaged.size * 4 / 5))
        try mv.mount()
        try mv.shell(
            """
            python3 - <<'PY'
            \(directRead)
            import errno
            assert len(direct('damaged', 0, 512 * 1024)) == 512 * 1024  # the first half alone is intact
            try: direct('damaged', 0, 1 << 20); raise SystemExit('a read over the damaged chunk returned data')
            except OSError as e: assert e.errno == errno.EIO, e
            PY
            """)
        try mv.unmount()
    }

    /// Writing, truncating or chowning a set-user-ID or set-group-ID file clears those bits the way
    /// ext4 does (the set-group-ID bit when the group may execute or the writer is outside the group;
    /// root keeps them on write), the kernel sees the new mode at once, and the vault stores it.
    func testSetIDBitsAreClearedOnWriteTruncateAndChown() throws { try setIDBitsAreClearedOnWriteTruncateAndChown() }

    func testSetIDBitsAreClearedOnWriteTruncateAndChownThroughIoUring() throws {
        try throughIoUring(setIDBitsAreClearedOnWriteTruncateAndChown)
    }

    func setIDBitsAreClearedOnWriteTruncateAndChown() throws {
        try mv.mount(["-o", "allow_other"])
        let asNobody = "setpriv --reuid=65534 --regid=65534 --clear-groups"
        try mv.shell(
            """
            chmod 755 ..
            for f in w1 w2 w3 t1 t2 root c1 c2; do echo data > $f; done
            chmod 4777 w1 t1 t2 root; chmod 2777 w2; chmod 2766 w3; chmod 6775 c1; chmod 4755 c2
            \(asNobody) sh -c 'echo more >> w1; echo more >> w2; echo more >> w3; truncate -s 1 t1; : > t2'
            echo more >> root
            chown 65534 c1; chown :65534 c2
            """)
        let expected = [
            "w1": "777", "w2": "777", "w3": "766", "t1": "777", "t2": "777", "root": "4777", "c1": "775", "c2": "755",
        ]
        func modes() throws -> [String: String] {
            let out = try mv.shell("stat -c '%n %a' w1 w2 w3 t1 t2 root c1 c2").stdout
            return Dictionary(
                uniqueKeysWithValues: out.split(separator: "\n").map {
                    let f = $0.split(separator: " ")
                    return (String(f[0]), String(f[1]))
                })
        }
        XCTAssertEqual(try modes(), expected)
        XCTAssertEqual(try mv.shell("cat w1 t1").stdout, "data\nmore\nd")
        try mv.unmount()
        try mv.mount()
        XCTAssertEqual(try modes(), expected, "the cleared modes are stored in the vault")
        try mv.unmount()
        try mv.verify()
    }
}
