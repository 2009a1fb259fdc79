import type { Theme } from "vitepress"
import DefaultTheme from "vitepress/theme"
import Calculator from "../components/Calculator.vue"
import "./custom.css"

const theme: Theme = {
  extends: DefaultTheme,
  enhanceApp({ app }) {
    app.component("Calculator", Calculator)
  }
}

export default theme
