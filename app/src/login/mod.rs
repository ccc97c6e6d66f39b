//! The sign-in page (it posts to the server's `/login`, not a server function).

mod page;

pub use page::LoginPage;
