import Foundation
import XCTest

/// A vault larger than one batch (five files of 40 MB: uploads go in batches of about 64 MB, downloads
/// in batches from 32 MB), so that a backup uploads and a restore downloads in several rclone runs,
/// each checked or uploaded while the next is prepared: one rclone at a time, the manifest last, a
/// failure in a later batch failing the whole command, damage in a later batch refused.
final class BatchedTransferTests: XCTestCase {
    var w: BackupWorld!
    var remote: String { w.root + "/remote" }
    let files = (1...5).map { "/large-\($0).bin" }

    override func setUpWithError() throws {
        w = try BackupWorld()
        try w.put(Dictionary(uniqueKeysWithValues: files.map { ($0, BackupWorld.random(40_000_000)) }))
    }

    override func tearDown() { w = nil }

    /// Upload and download runs that carry objects (and backup headers) only.
    func objectRuns(_ runs: [[String]]) -> [[String]] {
        runs.filter { $0.allSatisfy { $0.hasPrefix("objects/") || $0.hasPrefix("keys/") } }
    }

    func testABackupUploadsInSeveralRunsOneAtATimeAndTheManifestLast() throws {
        let recorder = try RcloneRecorder(in: w, name: "recorded")
        try w.vaultaire(
            ["backup", w.vault, remote, "--passphrase-file", w.passphraseFile], device: recorder.environment)
        let uploads = recorder.uploads
        XCTAssertEqual(uploads.last, ["snapshots/0000000001"], "the manifest goes alone, last")
        XCTAssertEqual(objectRuns(uploads).count, uploads.count - 1, "every other upload carries objects: \(uploads)")
        XCTAssertGreaterThanOrEqual(uploads.count - 1, 2, "the objects go in several runs: \(uploads)")
        XCTAssertFalse(recorder.overlapped, "two rclone runs at once")
    }

    func testARestoreDownloadsInSeveralRunsAndRestoresEveryFile() throws {
        try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
        let expected = try w.tree(of: w.vault)
        let recorder = try RcloneRecorder(in: w, name: "recorded")
        let device = w.freshDevice()
        let target = w.root + "/restored"
        try w.vaultaire(
            ["restore", remote, target, "--passphrase-file", w.passphraseFile],
            device: device.merging(recorder.environment) { $1 })
        XCTAssertGreaterThanOrEqual(objectRuns(recorder.downloads).count, 2, "\(recorder.downloads)")
        XCTAssertFalse(recorder.overlapped, "two rclone runs at once")
        XCTAssertEqual(try w.tree(of: target, device: device), expected)
    }

    func testAFailedSecondUploadFailsTheBackupAndLeavesNoSnapshot() throws {
        let failing = try RcloneRecorder(in: w, name: "failing", failingUpload: 2)
        let r = try w.vaultaire(
            ["backup", w.vault, remote, "--passphrase-file", w.passphraseFile], device: failing.environment,
            expect: 23)
        XCTAssertEqual(r.errorLines, ["Error: remote \(remote): unreachable: simulated failure of upload 2"])
        XCTAssertEqual(r.stdout, "", "nothing claims a snapshot")
        XCTAssertEqual(objectRuns(failing.uploads).count, 2, "the refused upload carried objects: \(failing.uploads)")
        XCTAssertEqual(failing.uploads.count, 2, "nothing uploaded after the refusal: \(failing.uploads)")
        XCTAssertEqual(try w.remoteFiles(remote).filter { $0.hasPrefix("snapshots/") }, [], "no manifest uploaded")
        let cache = w.root + "/.cache/vaultaire/backup-hashes"
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: cache)) ?? [], [], "no hash cache kept")

        // The first upload's objects arrived whole: the next backup uploads only the rest.
        let again = try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
        let firstObjects = failing.uploads[0].filter { $0.hasPrefix("objects/") }.count
        XCTAssertEqual(
            BackupWorld.number(before: "objects already there", in: again.stdout), firstObjects, again.stdout)
        try w.vaultaire(["backup", "--verify", remote, "--passphrase-file", w.passphraseFile], device: w.freshDevice())
    }

    func testADamagedObjectInALateDownloadIsRefusedAndNothingIsLeft() throws {
        try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
        // Where each object comes in a restore: the runs are the same for the same snapshot.
        let recorder = try RcloneRecorder(in: w, name: "recorded")
        try w.vaultaire(
            ["restore", remote, w.root + "/first-restore", "--passphrase-file", w.passphraseFile],
            device: w.freshDevice().merging(recorder.environment) { $1 })
        let runs = objectRuns(recorder.downloads)
        XCTAssertGreaterThanOrEqual(runs.count, 2, "\(recorder.downloads)")
        let victim = try XCTUnwrap(runs.last?.first { $0.hasPrefix("objects/") })
        var bytes = try Data(contentsOf: URL(fileURLWithPath: remote + "/" + victim))
        bytes[bytes.count / 2] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: remote + "/" + victim))

        let parent = w.root + "/restores"
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        let r = try w.vaultaire(
            ["restore", remote, parent + "/target", "--passphrase-file", w.passphraseFile], device: w.freshDevice(),
            expect: 24)
        XCTAssertTrue(
            r.errorLines.count == 1
                && r.errorLines[0].hasPrefix("Error: remote \(remote): backup damaged: \(victim) (")
                && r.errorLines[0].hasSuffix("of snapshot 1) does not match its hash"), r.stderr)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: parent), [],
            "neither the target nor the downloads are left")
        let verify = try w.vaultaire(
            ["backup", "--verify", remote, "--passphrase-file", w.passphraseFile], device: w.freshDevice(), expect: 24)
        XCTAssertTrue(verify.stderr.contains("\(victim) ("), verify.stderr)
    }

    /// rclone's own checksum is skipped for the batches (the manifest's SHA-256 is the check): an
    /// object corrupted on its way — here by a wrapper that flips a byte of the first object each
    /// batch download brings — is fetched once more, alone and with rclone's checksum, and the
    /// restore succeeds with every file as it was; only an object that fails twice is damage.
    func testAnObjectCorruptedInTransitIsFetchedAgain() throws {
        try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
        let expected = try w.tree(of: w.vault)
        let directory = w.root + "/corrupting"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let script = directory + "/rclone"
        let text = """
            #!/bin/bash
            [ "$1" = copy ] || exec /usr/bin/rclone "$@"
            list= previous= destination= checksums=yes
            for a in "$@"; do
              [ "$previous" = --files-from ] && list="$a"
              [ "$a" = --ignore-checksum ] && checksums=no
              previous="$a"; destination="$a"
            done
            cp "$list" "\(directory)/list-$(ls '\(directory)' | grep -c '^list-')-$checksums"
            /usr/bin/rclone "$@" || exit $?
            first=$(grep '^objects/' "$list" | head -n 1)
            if [ "$checksums" = no ] && [ -n "$first" ]; then
              printf '\\xff' | dd of="$destination/$first" bs=1 seek=100 conv=notrunc status=none
            fi

            """
        try text.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        let device = w.freshDevice()
        let target = w.root + "/restored"
        let r = try w.vaultaire(
            ["restore", remote, target, "--passphrase-file", w.passphraseFile],
            device: device.merging(["VAULTAIRE_RCLONE": script]) { $1 })
        XCTAssertEqual(r.status, 0, r.stderr)
        let lists = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("list-") }
        let refetches = lists.filter { $0.hasSuffix("-yes") }.compactMap {
            try? String(contentsOfFile: directory + "/" + $0, encoding: .utf8)
        }.filter { $0.contains("objects/") }
        XCTAssertEqual(refetches.count, 1, "one second fetch, with rclone's checksum: \(lists)")
        let batches = lists.filter { $0.hasSuffix("-no") }.count
        XCTAssertEqual(
            refetches.first?.split(separator: "\n").count, batches, "the first object of each batch, fetched again")
        XCTAssertEqual(try w.tree(of: target, device: device), expected)
    }
}
