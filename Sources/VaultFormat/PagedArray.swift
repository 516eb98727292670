/// An array kept in pages of `pageSize` elements, each an array of its own. A copy shares every page,
/// and a change after it copies only the page it touches: the compaction of a vault of a million files
/// takes a copy of the index to write out while requests go on changing the original, and a flat array
/// would be copied whole (about 100 MB) at the first change.
struct PagedArray<Element>: Sequence {
    static var pageSize: Int { 4096 }
    private var pages: [[Element]] = []
    private(set) var count = 0

    subscript(position: Int) -> Element {
        get { pages[position / Self.pageSize][position % Self.pageSize] }
        set { pages[position / Self.pageSize][position % Self.pageSize] = newValue }
    }

    mutating func append(_ element: Element) {
        if count % Self.pageSize == 0 {
            var page: [Element] = []
            page.reserveCapacity(Self.pageSize)
            pages.append(page)
        }
        pages[pages.count - 1].append(element)
        count += 1
    }

    mutating func removeLast() {
        pages[pages.count - 1].removeLast()
        if pages[pages.count - 1].isEmpty { pages.removeLast() }
        count -= 1
    }

    func makeIterator() -> FlattenSequence<[[Element]]>.Iterator { pages.joined().makeIterator() }
}
