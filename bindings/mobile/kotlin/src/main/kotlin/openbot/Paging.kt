// Paged lists as Flows: the generated `<list>Flow` functions (Operations.kt) walk their pages
// with this one helper.

package uniffi.openbot

import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.flow

/**
 * Every item of a paged list, in order: asks `fetch` for the first page (cursor `null`), emits
 * its `items`, and goes on with its `next` cursor until a page has none. A page is asked for
 * only when the collector wants more; each collection starts again from the first page.
 */
fun <P, T> pagedFlow(fetch: suspend (String?) -> P, items: (P) -> List<T>, next: (P) -> String?): Flow<T> = flow {
    var cursor: String? = null
    do {
        val page = fetch(cursor)
        for (item in items(page)) emit(item)
        cursor = next(page)
    } while (cursor != null)
}
